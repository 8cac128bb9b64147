package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/portico-dev/portico/internal/proxysync"
)

// `portico proxy-status --cluster` finds the controller's replicas itself:
// the Running Pods of --namespace matching --selector, each asked for its
// /debug/proxies on its debug port (the container port named "debug",
// else --debug-port). It reaches a Pod through a port-forward of the API
// server (--connect port-forward, the default: it works from anywhere
// the kubeconfig does, and reaches a debug server that listens on the
// Pod's loopback), or at the Pod's IP (--connect pod-ip, from inside the
// cluster network). Requests carry the kubeconfig's credentials (its
// bearer token, or what its exec plugin gives) as the debug views
// require: the debug server checks them with a TokenReview and a
// SubjectAccessReview (get on /debug/proxies). The API server's pod proxy
// is not used: it strips the Authorization header. A debug server on the
// Pod's loopback speaks plain HTTP and asks for no token; one exposed
// (the chart's debug.expose) speaks HTTPS with a certificate of its own,
// which is not verified (its CA is nowhere the client could learn it; the
// port-forward is itself authenticated end to end by the API server).

// clusterTarget is one replica's debug server.
type clusterTarget struct {
	pod  string
	ip   string
	port int
}

type clusterOptions struct {
	kubeconfig, namespace, selector, connect string
	debugPort                                int
}

// restConfigFrom loads the kubeconfig as kubectl does: the file given,
// else $KUBECONFIG, else ~/.kube/config, else the in-cluster config.
func restConfigFrom(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// clusterReports fetches the report of every replica found; the errors of
// those that failed are returned beside the reports of the others.
func clusterReports(ctx context.Context, o clusterOptions, query url.Values) ([]proxysync.Report, []error, error) {
	if o.connect != "port-forward" && o.connect != "pod-ip" {
		return nil, nil, fmt.Errorf("--connect must be port-forward or pod-ip, not %q", o.connect)
	}
	cfg, err := restConfigFrom(o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	targets, err := findReplicas(ctx, cs, o)
	if err != nil {
		return nil, nil, err
	}
	if len(targets) == 0 {
		return nil, nil, fmt.Errorf("no Running Pod in namespace %s matches %q", o.namespace, o.selector)
	}
	// The kubeconfig's credentials on a transport of our own (the debug
	// server's certificate is not the API server's).
	auth, err := rest.HTTPWrappersForConfig(cfg, &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // see the comment above
	if err != nil {
		return nil, nil, err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: auth}
	defer client.CloseIdleConnections()
	var (
		mu      sync.Mutex
		reports []proxysync.Report
		errs    []error
		wg      sync.WaitGroup
	)
	for _, tg := range targets {
		wg.Go(func() {
			rep, err := fetchReplica(ctx, cfg, cs, client, o, tg, query)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("replica %s: %w", tg.pod, err))
				return
			}
			reports = append(reports, rep)
		})
	}
	wg.Wait()
	sort.Slice(reports, func(i, j int) bool { return reports[i].Replica < reports[j].Replica })
	return reports, errs, nil
}

func findReplicas(ctx context.Context, cs kubernetes.Interface, o clusterOptions) ([]clusterTarget, error) {
	if _, err := metav1.ParseToLabelSelector(o.selector); err != nil {
		return nil, fmt.Errorf("--selector: %w", err)
	}
	pods, err := cs.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: o.selector})
	if err != nil {
		return nil, fmt.Errorf("listing the controller's Pods: %w", err)
	}
	var out []clusterTarget
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		port, _ := strconv.Atoi(debugPort(&p, strconv.Itoa(o.debugPort)))
		out = append(out, clusterTarget{pod: p.Name, ip: p.Status.PodIP, port: port})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod < out[j].pod })
	return out, nil
}

// fetchReplica asks one replica for its report, over HTTPS and, when the
// server answers in plain HTTP (a debug server on the Pod's loopback),
// over HTTP.
func fetchReplica(ctx context.Context, cfg *rest.Config, cs *kubernetes.Clientset, client *http.Client, o clusterOptions, tg clusterTarget, query url.Values) (proxysync.Report, error) {
	hostport := net.JoinHostPort(tg.ip, strconv.Itoa(tg.port))
	if o.connect == "port-forward" {
		local, stop, err := forwardPort(ctx, cfg, cs, o.namespace, tg.pod, tg.port)
		if err != nil {
			return proxysync.Report{}, err
		}
		defer stop()
		hostport = local
	} else if tg.ip == "" {
		return proxysync.Report{}, errors.New("no Pod IP")
	}
	path := "/debug/proxies?" + query.Encode()
	rep, err := fetchReportWith(ctx, client, "https://"+hostport+path)
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		rep, err = fetchReportWith(ctx, client, "http://"+hostport+path)
	}
	return rep, err
}

// forwardPort forwards a local loopback port to port of the Pod, as
// kubectl port-forward does; stop closes it.
func forwardPort(ctx context.Context, cfg *rest.Config, cs *kubernetes.Clientset, namespace, pod string, port int) (string, func(), error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", nil, err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stopCh, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stopCh, ready, io.Discard, io.Discard)
	if err != nil {
		return "", nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	var once sync.Once
	stop := func() { once.Do(func() { close(stopCh) }) }
	select {
	case <-ready:
	case err := <-failed:
		return "", nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		stop()
		return "", nil, fmt.Errorf("port-forward to %s: no local port: %v", pod, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
}

// clusterRows are the rows of every replica's report, each computed on
// its replica's clock; a proxy on two replicas while it reconnects is
// listed once, with its newest stream, as in the leader's aggregation.
func clusterRows(reports []proxysync.Report, staleAfter time.Duration, detail bool) []proxyRow {
	type key struct{ gw, node string }
	newest := map[key]proxyRow{}
	for _, r := range reports {
		for _, row := range proxyRows(r, staleAfter, detail) {
			k := key{row.Gateway, row.Proxy}
			if o, ok := newest[k]; !ok || row.Connected.After(o.Connected) {
				newest[k] = row
			}
		}
	}
	out := make([]proxyRow, 0, len(newest))
	for _, row := range newest {
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Gateway != out[j].Gateway {
			return out[i].Gateway < out[j].Gateway
		}
		return out[i].Proxy < out[j].Proxy
	})
	return out
}
