package dataplane

// The watchdog: a shell in a session of its own that outlives a test
// process killed without running its cleanups (go test's -timeout,
// SIGKILL). Once that process is gone it kills whatever still runs in the
// data plane's network namespaces, deletes them and the bridge, and
// removes the data plane's directory. Close stops it first.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const watchdogScript = `
owner=$1 prefix=$2 bridge=$3 dir=$4
while kill -0 "$owner" 2>/dev/null && [ -e "$dir/watchdog" ]; do sleep 1; done
[ -e "$dir/watchdog" ] || exit 0
for ns in $(ip netns list | awk '{print $1}'); do
  case "$ns" in "$prefix"*) ;; *) continue ;; esac
  for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null; done
  ip netns del "$ns"
done
ip link del "$bridge" 2>/dev/null
rm -rf "$dir"
`

// startWatchdog starts the watchdog of the data plane's bridge and
// directory for this process.
func (d *DataPlane) startWatchdog() error {
	marker := filepath.Join(d.dir, "watchdog")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return err
	}
	// testenv.Bridge names its namespaces portico-<tag>-<n> and itself
	// ptb<tag>.
	prefix := "portico-" + strings.TrimPrefix(d.bridge.Name, "ptb") + "-"
	cmd := exec.Command("sh", "-c", watchdogScript, "watchdog", strconv.Itoa(os.Getpid()), prefix, d.bridge.Name, d.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// stopWatchdog makes the watchdog exit (within a second).
func (d *DataPlane) stopWatchdog() {
	if d.dir != "" {
		_ = os.Remove(filepath.Join(d.dir, "watchdog"))
	}
}
