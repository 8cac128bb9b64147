package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// procCPUSeconds returns the CPU time (user + system) a process has used,
// from /proc/<pid>/stat.
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces, so fields are counted after its closing parenthesis.
func parseProcStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the command", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat field %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / clockTicks, nil
}

// CPUUsage is the CPU time of each process of the suite, in seconds, by
// name: the cluster's components (by their pid files), the replicas and
// the suite itself ("bench").
type CPUUsage map[string]float64

// cpuUsage reads the CPU time of the cluster's components (when we
// started the cluster), of the replicas and of this process. A process
// that cannot be read is left out.
func cpuUsage(cl *Cluster, replicas []*Replica) CPUUsage {
	u := CPUUsage{}
	if cl != nil && cl.Dir != "" {
		files, _ := filepath.Glob(filepath.Join(cl.Dir, "pids", "*.pid"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".pid")
			if name == "watchdog" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				continue
			}
			if s, err := procCPUSeconds(pid); err == nil {
				u[name] = s
			}
		}
	}
	for _, r := range replicas {
		if r == nil || r.Exited() {
			continue
		}
		if s, err := procCPUSeconds(r.Pid()); err == nil {
			u[r.Name] = s
		}
	}
	if s, err := procCPUSeconds(os.Getpid()); err == nil {
		u["bench"] = s
	}
	return u
}

// Since is the CPU time used from before to u, for the processes in both,
// rounded to 10 ms.
func (u CPUUsage) Since(before CPUUsage) CPUUsage {
	d := CPUUsage{}
	for k, v := range u {
		if b, ok := before[k]; ok {
			d[k] = round(max(v-b, 0), 2)
		}
	}
	return d
}

// byRole names the replicas of u by their role: "leader" for lead, and
// "follower" for the others.
func (u CPUUsage) byRole(lead *Replica) CPUUsage {
	for k, v := range u {
		if !strings.HasPrefix(k, "bench-") {
			continue
		}
		delete(u, k)
		if lead != nil && k == lead.Name {
			u["leader"] += v
		} else {
			u["follower"] += v
		}
	}
	return u
}
