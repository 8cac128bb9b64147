package testenv

// Processes a test starts (Portico, Envoy, backends): output kept in a
// file, the whole process group stopped when the test ends (SIGTERM, then
// SIGKILL after 10 s), and the end of the output printed when the test
// has failed.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a running process of a test.
type Process struct {
	Name    string
	OutPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// StartProcess starts argv with env added to the environment, its stdout
// and stderr going to a file in dir, and stops it when the test ends.
func StartProcess(t testing.TB, name, dir string, argv []string, env ...string) *Process {
	t.Helper()
	p, err := LaunchProcess(name, dir, argv, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s (%s), last lines of its output:\n%s", name, strings.Join(argv, " "), tail(p.OutPath, 40))
		}
	})
	return p
}

// LaunchProcess is StartProcess for callers that are not tests (the
// benchmark suite): the caller stops it.
func LaunchProcess(name, dir string, argv []string, env ...string) (*Process, error) {
	outPath := filepath.Join(dir, name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	p, err := LaunchCommand(name, cmd)
	if err != nil {
		out.Close()
		return nil, err
	}
	p.OutPath = outPath
	go func() {
		<-p.exited
		out.Close()
	}()
	return p, nil
}

// launchTee is LaunchProcess with the output also written to stdout and
// stderr (either may be nil).
func launchTee(name, dir string, argv, env []string, stdout, stderr io.Writer) (*Process, error) {
	outPath := filepath.Join(dir, name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	tee := func(w io.Writer) io.Writer {
		if w == nil {
			return out
		}
		return io.MultiWriter(out, w)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = tee(stdout), tee(stderr)
	p, err := LaunchCommand(name, cmd)
	if err != nil {
		out.Close()
		return nil, err
	}
	p.OutPath = outPath
	go func() {
		<-p.exited
		out.Close()
	}()
	return p, nil
}

// LaunchCommand starts cmd, whose environment and output the caller has
// set, in a process group of its own that dies with this process; Stop
// stops the group.
func LaunchCommand(name string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{Name: name, cmd: cmd, exited: make(chan struct{})}
	// Its own process group: a wrapper's children are stopped with it.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM to the process group and waits for the process to
// exit, killing the group after 10 s. It returns the exit error.
func (p *Process) Stop() error { return p.Terminate(10 * time.Second) }

// Terminate sends SIGTERM to the process group and waits for the process
// to exit, killing the group after grace (a Pod's termination grace
// period). It returns the exit error.
func (p *Process) Terminate(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(max(grace, 0))
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	return p.exitErr
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is the process's exit error, once Exited is closed.
func (p *Process) ExitErr() error { return p.exitErr }

// Output is everything the process has printed so far.
func (p *Process) Output() string {
	data, _ := os.ReadFile(p.OutPath)
	return string(data)
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
