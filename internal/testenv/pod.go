package testenv

// A Pod's container as a process, the way a kubelet and a container
// runtime would set it up, as far as the programs Portico provisions can
// tell: ConfigMap and Secret volumes laid out by the kubelet's atomic
// writer (key → ..data/key, ..data → a timestamped directory), the files
// owned by root with the volume's mode, their group the Pod's fsGroup
// (files then also group-readable) or root; each volume mounted read-only
// at its mountPath in a private mount namespace (an overlay makes the
// mount points in directories such as /etc without touching the host's);
// the process started as the container's user with the fsGroup as a
// supplementary group. This is what catches a certificate that the
// container's user cannot read.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Volume is a ConfigMap or Secret volume of a Pod.
type Volume struct {
	// MountPath is where the container sees it.
	MountPath string
	// Files are the keys and their contents.
	Files map[string][]byte
	// Mode is the volume's defaultMode (0644 when zero, as Kubernetes
	// defaults it).
	Mode os.FileMode
}

// Container is what of a Pod's container and its securityContext matters
// to a process.
type Container struct {
	Volumes []Volume
	// RunAsUser and RunAsGroup; RunAsGroup < 0 leaves the group of the
	// user's image, which for the images Portico runs (distroless
	// nonroot) is the user's ID.
	RunAsUser, RunAsGroup int64
	// FSGroup is the Pod's fsGroup, or -1.
	FSGroup int64
}

// Prepare lays the volumes out under dir and returns Wrap, which turns a
// command line into one that runs it with the volumes mounted at their
// paths, as the container's user. Everything it makes is under dir.
func (c Container) Prepare(dir string) (func(argv []string) []string, error) {
	var script strings.Builder
	script.WriteString("set -e\n")
	overlaid := map[string]bool{}
	for i, v := range c.Volumes {
		src := filepath.Join(dir, fmt.Sprintf("vol%d", i))
		if err := c.layout(src, v); err != nil {
			return nil, err
		}
		// The top-level directory of the mount path (/etc of
		// /etc/envoy) gets an overlay, so the mount point can be made in
		// it within this mount namespace only.
		top := "/" + strings.SplitN(strings.TrimPrefix(filepath.Clean(v.MountPath), "/"), "/", 2)[0]
		if !overlaid[top] {
			overlaid[top] = true
			ov := filepath.Join(dir, fmt.Sprintf("overlay%d", len(overlaid)))
			for _, d := range []string{"upper", "work"} {
				if err := os.MkdirAll(filepath.Join(ov, d), 0o755); err != nil {
					return nil, err
				}
			}
			fmt.Fprintf(&script, "mount -t overlay overlay -o lowerdir=%s,upperdir=%s/upper,workdir=%s/work %s\n", top, ov, ov, top)
		}
		fmt.Fprintf(&script, "mkdir -p %s\nmount --bind %s %s\nmount -o remount,bind,ro %s\n", v.MountPath, src, v.MountPath, v.MountPath)
	}
	uid := strconv.FormatInt(c.RunAsUser, 10)
	gid := uid
	if c.RunAsGroup >= 0 {
		gid = strconv.FormatInt(c.RunAsGroup, 10)
	}
	groups := "--clear-groups"
	if c.FSGroup >= 0 {
		groups = "--groups=" + strconv.FormatInt(c.FSGroup, 10)
	}
	fmt.Fprintf(&script, "exec setpriv --reuid=%s --regid=%s %s --inh-caps=-all --bounding-set=-all -- \"$@\"\n", uid, gid, groups)
	path := filepath.Join(dir, "container.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o755); err != nil {
		return nil, err
	}
	return func(argv []string) []string {
		return append([]string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", path}, argv...)
	}, nil
}

// layout writes v as the kubelet's atomic writer does: the files in a
// timestamped directory, ..data pointing at it, each key a symlink
// through ..data; owned by root, group fsGroup (and then group-readable)
// or root.
func (c Container) layout(dir string, v Volume) error {
	mode := v.Mode
	if mode == 0 {
		mode = 0o644
	}
	gid := 0
	if c.FSGroup >= 0 {
		gid = int(c.FSGroup)
		mode |= 0o040
	}
	ts := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.MkdirAll(ts, 0o755); err != nil {
		return err
	}
	keys := make([]string, 0, len(v.Files))
	for k := range v.Files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := filepath.Join(ts, k)
		if err := os.WriteFile(f, v.Files[k], 0o600); err != nil {
			return err
		}
		if err := os.Chown(f, 0, gid); err != nil {
			return err
		}
		if err := os.Chmod(f, mode); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for _, d := range []string{dir, ts} {
		if err := os.Chown(d, 0, gid); err != nil {
			return err
		}
		dm := os.FileMode(0o755)
		if c.FSGroup >= 0 {
			dm = 0o2755 // setgid, as the kubelet leaves fsGroup directories
		}
		if err := os.Chmod(d, dm); err != nil {
			return err
		}
	}
	return nil
}
