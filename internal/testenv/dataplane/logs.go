package dataplane

// Container logs, as a kubelet keeps them: one file per container in the
// CRI format ("<RFC3339Nano time> <stream> F <line>"), which kwok's
// kubelet server reads (pkg/kwok/server, k8s.io/cri-client logs) when the
// API server asks for a Pod's log. kwok learns which file belongs to
// which container from a kwok.x-k8s.io/v1alpha1 Logs object named after
// the Pod (kwok runs with --enable-crds=Logs, see hack/cluster-up.sh).

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// criLog is a container's log file.
type criLog struct {
	mu sync.Mutex
	f  *os.File
}

func openCRILog(path string) (*criLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &criLog{f: f}, nil
}

// stream is a writer of one stream (stdout or stderr): each complete line
// becomes one log entry stamped with the time it was written.
func (l *criLog) stream(name string) io.Writer { return &criStream{log: l, name: name} }

func (l *criLog) Close() error { return l.f.Close() }

type criStream struct {
	log     *criLog
	name    string
	pending []byte
}

func (s *criStream) Write(p []byte) (int, error) {
	s.pending = append(s.pending, p...)
	for {
		i := bytes.IndexByte(s.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := s.pending[:i]
		var b []byte
		b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, ' ')
		b = append(b, s.name...)
		b = append(b, " F "...)
		b = append(b, line...)
		b = append(b, '\n')
		s.log.mu.Lock()
		_, err := s.log.f.Write(b)
		s.log.mu.Unlock()
		s.pending = s.pending[i+1:]
		if err != nil {
			return len(p), err
		}
	}
}

var kwokLogs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// logRegistry creates and deletes the Logs objects of the Pods it runs;
// nil when the cluster has no Logs resource.
type logRegistry struct {
	dyn  dynamic.Interface
	logf func(format string, args ...any)
}

// register tells kwok where the containers of pod log (container name →
// file).
func (r *logRegistry) register(ctx context.Context, pod *corev1.Pod, files map[string]string) {
	if r == nil || r.dyn == nil {
		return
	}
	var logs []any
	for _, c := range pod.Spec.Containers {
		if f, ok := files[c.Name]; ok {
			logs = append(logs, map[string]any{"containers": []any{c.Name}, "logsFile": f})
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata": map[string]any{
			"name": pod.Name, "namespace": pod.Namespace,
			// Gone with its Pod, even if the data plane is not told.
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID),
			}},
		},
		"spec": map[string]any{"logs": logs},
	}}
	res := r.dyn.Resource(kwokLogs).Namespace(pod.Namespace)
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *unstructured.Unstructured
		if cur, err = res.Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		r.logf("dataplane: Logs for Pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// unregister deletes pod's Logs object.
func (r *logRegistry) unregister(ctx context.Context, pod *corev1.Pod) {
	if r == nil || r.dyn == nil {
		return
	}
	err := r.dyn.Resource(kwokLogs).Namespace(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.logf("dataplane: deleting Logs of Pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}
