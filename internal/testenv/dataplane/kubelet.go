package dataplane

// What a kubelet works out before it starts a container: the environment
// (values, fieldRefs, ConfigMap and Secret keys), the command line with
// $(VAR) references expanded, the ConfigMap and Secret volumes of its
// mounts, and the user, group and fsGroup it runs as.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/testenv"
)

// Container is a Pod's container as a runtime needs it.
type Container struct {
	Pod  *corev1.Pod
	Spec *corev1.Container
	// Env is the resolved environment, NAME=value, in the container's
	// order (later entries win, as in Kubernetes).
	Env []string
	// Command and Args with $(VAR) expanded; Command empty means the
	// image's entrypoint.
	Command, Args []string
	// Process is the container's volumes and user, for
	// testenv.Container.Prepare.
	Process testenv.Container
}

// ResolveContainer resolves c of pod as a kubelet would, reading ConfigMaps and Secrets
// with cs. defaultUser is the image's user (its USER), used when neither
// the container nor the Pod sets runAsUser.
func ResolveContainer(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, defaultUser int64) (*Container, error) {
	env, err := resolveEnv(ctx, cs, pod, c)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	out := &Container{Pod: pod, Spec: c, Env: env}
	for _, a := range c.Command {
		out.Command = append(out.Command, expand(a, vars))
	}
	for _, a := range c.Args {
		out.Args = append(out.Args, expand(a, vars))
	}
	vols, err := resolveVolumes(ctx, cs, pod, c)
	if err != nil {
		return nil, err
	}
	out.Process = testenv.Container{Volumes: vols, RunAsUser: defaultUser, RunAsGroup: -1, FSGroup: -1}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			out.Process.RunAsUser = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			out.Process.RunAsGroup = *psc.RunAsGroup
		}
		if psc.FSGroup != nil {
			out.Process.FSGroup = *psc.FSGroup
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			out.Process.RunAsUser = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			out.Process.RunAsGroup = *sc.RunAsGroup
		}
	}
	return out, nil
}

// resolveEnv is the container's environment: envFrom first, then env,
// each name's last value winning.
func resolveEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	var out []string
	vars := map[string]string{}
	set := func(k, v string) {
		vars[k] = v
		out = append(out, k+"="+v)
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom ConfigMap %s: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if optional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := envSource(ctx, cs, pod, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

// envSource resolves a valueFrom; ok is false for a missing optional key.
func envSource(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldRef(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return "", false, ignoreOptional(r.Optional, err)
		}
		v, ok := cm.Data[r.Key]
		if !ok && !optional(r.Optional) {
			return "", false, fmt.Errorf("ConfigMap %s has no key %s", r.Name, r.Key)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return "", false, ignoreOptional(r.Optional, err)
		}
		v, ok := s.Data[r.Key]
		if !ok && !optional(r.Optional) {
			return "", false, fmt.Errorf("Secret %s has no key %s", r.Name, r.Key)
		}
		return string(v), ok, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom %+v", src)
}

func ignoreOptional(opt *bool, err error) error {
	if optional(opt) {
		return nil
	}
	return err
}

// fieldRef is the downward API's value of path.
func fieldRef(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels", pod.Labels}, {"metadata.annotations", pod.Annotations}} {
		if k, ok := strings.CutPrefix(path, p.prefix+"['"); ok && strings.HasSuffix(k, "']") {
			return p.m[strings.TrimSuffix(k, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %s", path)
}

// expand replaces $(VAR) with VAR's value when VAR is defined, leaves
// other references as written and turns $$ into $, as Kubernetes expands
// command, args and env values.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// resolveVolumes are the ConfigMap, Secret and projected volumes c
// mounts, with their items and modes. Other volume types, subPath mounts,
// items in subdirectories and per-item modes are not supported.
func resolveVolumes(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]testenv.Volume, error) {
	byName := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		byName[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []testenv.Volume
	for _, m := range c.VolumeMounts {
		v := byName[m.Name]
		if v == nil {
			return nil, fmt.Errorf("volumeMount %s: no such volume", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %s: subPath is not supported", m.Name)
		}
		var (
			data  map[string][]byte
			items []corev1.KeyToPath
			mode  *int32
			err   error
		)
		switch {
		case v.ConfigMap != nil:
			var cm *corev1.ConfigMap
			cm, err = cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err == nil {
				data = map[string][]byte{}
				for k, s := range cm.Data {
					data[k] = []byte(s)
				}
				for k, b := range cm.BinaryData {
					data[k] = b
				}
			} else if optional(v.ConfigMap.Optional) {
				err, data = nil, map[string][]byte{}
			}
			items, mode = v.ConfigMap.Items, v.ConfigMap.DefaultMode
		case v.Secret != nil:
			var s *corev1.Secret
			s, err = cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err == nil {
				data = s.Data
			} else if optional(v.Secret.Optional) {
				err, data = nil, map[string][]byte{}
			}
			items, mode = v.Secret.Items, v.Secret.DefaultMode
		case v.Projected != nil:
			data, err = projectedFiles(ctx, cs, pod, v.Projected)
			mode = v.Projected.DefaultMode
		default:
			return nil, fmt.Errorf("volume %s: only ConfigMap, Secret and projected volumes are supported", v.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		files, err := volumeFiles(data, items)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		vol := testenv.Volume{MountPath: m.MountPath, Files: files}
		if mode != nil {
			vol.Mode = os.FileMode(*mode)
		}
		out = append(out, vol)
	}
	return out, nil
}

// volumeFiles are the files of a volume: every key, or the items' paths.
func volumeFiles(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	files := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("no key %s", it.Key)
		}
		if strings.Contains(it.Path, "/") {
			return nil, fmt.Errorf("item path %s: subdirectories are not supported", it.Path)
		}
		if it.Mode != nil {
			return nil, fmt.Errorf("item %s: per-item modes are not supported", it.Key)
		}
		files[it.Path] = b
	}
	return files, nil
}

// projectedFiles are the files of a projected volume (the service-account
// volume every Pod gets: a token, the cluster's CA bundle and the
// namespace): a bound token from the TokenRequest API, ConfigMap and
// Secret keys, downward-API fields.
func projectedFiles(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, p *corev1.ProjectedVolumeSource) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(data map[string][]byte, items []corev1.KeyToPath) error {
		f, err := volumeFiles(data, items)
		for k, v := range f {
			files[k] = v
		}
		return err
	}
	for _, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			t := src.ServiceAccountToken
			sa := pod.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: t.ExpirationSeconds,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}
			if t.Audience != "" {
				req.Spec.Audiences = []string{t.Audience}
			}
			tok, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("token of ServiceAccount %s: %w", sa, err)
			}
			files[t.Path] = []byte(tok.Status.Token)
		case src.ConfigMap != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				if optional(src.ConfigMap.Optional) {
					continue
				}
				return nil, fmt.Errorf("ConfigMap %s: %w", src.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			if err := add(data, src.ConfigMap.Items); err != nil {
				return nil, err
			}
		case src.Secret != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, src.Secret.Name, metav1.GetOptions{})
			if err != nil {
				if optional(src.Secret.Optional) {
					continue
				}
				return nil, fmt.Errorf("Secret %s: %w", src.Secret.Name, err)
			}
			if err := add(s.Data, src.Secret.Items); err != nil {
				return nil, err
			}
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				if it.FieldRef == nil || strings.Contains(it.Path, "/") {
					return nil, fmt.Errorf("downwardAPI item %s: only fieldRef items at the top level are supported", it.Path)
				}
				v, err := fieldRef(pod, it.FieldRef.FieldPath)
				if err != nil {
					return nil, err
				}
				files[it.Path] = []byte(v)
			}
		default:
			return nil, fmt.Errorf("unsupported projected source %+v", src)
		}
	}
	return files, nil
}
