package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/proxysync"
)

// podPeers lists the other replicas of the controller for the leader's
// proxy-sync aggregation: the Running Pods of namespace matching selector
// but this one (POD_NAME), each at https://<Pod IP>:<debug port>, the
// port of its container port named "debug" (a rollout may change it),
// else this replica's. The debug server must listen off loopback (the
// chart's debug.expose).
func podPeers(cfg *rest.Config, namespace, selector, debugAddr string) (func(context.Context) ([]proxysync.Peer, error), error) {
	_, port, err := net.SplitHostPort(debugAddr)
	if err != nil {
		return nil, fmt.Errorf("--debug-address %q: %w", debugAddr, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("--debug-address %q: port: %w", debugAddr, err)
	}
	if _, err := metav1.ParseToLabelSelector(selector); err != nil {
		return nil, fmt.Errorf("--peer-selector: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	self := os.Getenv("POD_NAME")
	return func(ctx context.Context) ([]proxysync.Peer, error) {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		var out []proxysync.Peer
		for _, p := range pods.Items {
			if p.Name == self || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			out = append(out, proxysync.Peer{Name: p.Name, URL: "https://" + net.JoinHostPort(p.Status.PodIP, debugPort(&p, port))})
		}
		return out, nil
	}, nil
}

// debugPort is the Pod's container port named "debug", else def.
func debugPort(p *corev1.Pod, def string) string {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "debug" {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return def
}
