package dataplane

// Envoy containers run through testenv.StartEnvoy, the helper every Envoy
// test uses (admin address file, log file, process group, stop). It takes
// a testing.TB because tests start Envoys; here Envoys come and go with
// Pods while one test runs, so each gets a processTB of its own: its
// cleanups run when the Pod stops, its Fatal becomes Start's error.

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/portico-dev/portico/internal/testenv"
)

// EnvoyRuntime runs Portico's proxy containers: image repository
// envoyproxy/envoy, any tag.
type EnvoyRuntime struct {
	// Binary is an Envoy every user can execute (see New: the data
	// plane installs testenv.EnvoyBinary where the proxies' user can
	// run it).
	Binary string
}

func (r *EnvoyRuntime) Name() string { return "envoy" }
func (r *EnvoyRuntime) Handles(image string) bool {
	return imageRepository(image) == "envoyproxy/envoy"
}

// DefaultUser: the distroless Envoy images run as nonroot.
func (r *EnvoyRuntime) DefaultUser(string) int64 { return 65532 }

// Start runs Envoy with the container's arguments. The configuration
// path (--config-path, -c) and the log level are passed as
// testenv.EnvoyOptions, which adds its own log, admin-address and
// hot-restart flags.
func (r *EnvoyRuntime) Start(c *Container, sb *Sandbox) (Process, error) {
	if len(c.Command) > 0 && path.Base(c.Command[0]) != "envoy" {
		return nil, fmt.Errorf("envoy: command %v is not envoy", c.Command)
	}
	args := append([]string(nil), c.Args...)
	if len(c.Command) > 1 {
		args = append(append([]string(nil), c.Command[1:]...), args...)
	}
	var cfg string
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "--config-path" || a == "-c") && i+1 < len(args):
			cfg = args[i+1]
			i++
		case (a == "--log-level" || a == "-l") && i+1 < len(args):
			i++ // testenv.StartEnvoy sets the log level
		default:
			rest = append(rest, a)
		}
	}
	if cfg == "" {
		return nil, fmt.Errorf("envoy: no --config-path in %v", args)
	}
	wrap, err := sb.Wrap(c, r.Binary)
	if err != nil {
		return nil, err
	}
	tb := &processTB{name: c.Pod.Namespace + "/" + c.Pod.Name + "/" + c.Spec.Name, logf: sb.Logf}
	e, err := tb.run(func() *testenv.Envoy {
		return testenv.StartEnvoy(tb, testenv.EnvoyOptions{
			ConfigPath: cfg, Args: rest, Wrap: wrap, Env: c.Env, Dial: sb.Netns.DialContext,
		})
	})
	if err != nil {
		return nil, err
	}
	return &envoyProcess{e: e, tb: tb}, nil
}

type envoyProcess struct {
	e    *testenv.Envoy
	tb   *processTB
	once sync.Once
}

func (p *envoyProcess) Exited() <-chan struct{} { return p.e.Exited() }

func (p *envoyProcess) Stop() {
	p.once.Do(func() {
		select {
		case <-p.e.Exited():
			p.tb.Fail() // it died: its cleanup logs the end of its log
		default:
		}
		p.tb.close()
	})
}

func (p *envoyProcess) Tail() string {
	return lastLines(p.e.Log(), 30) + "\n" + lastLines(p.e.Output(), 10)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// processTB is the testing.TB of one Envoy process. It implements what
// testenv.StartEnvoy uses; the embedded nil TB makes anything else panic,
// which run turns into an error.
type processTB struct {
	testing.TB
	name string
	logf func(format string, args ...any)

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

type fatalPanic struct{ msg string }

func (t *processTB) run(start func() *testenv.Envoy) (e *testenv.Envoy, err error) {
	defer func() {
		if r := recover(); r != nil {
			t.Fail()
			t.close()
			if f, ok := r.(fatalPanic); ok {
				err = fmt.Errorf("%s", f.msg)
			} else {
				err = fmt.Errorf("starting envoy: %v", r)
			}
		}
	}()
	return start(), nil
}

func (t *processTB) Helper()      {}
func (t *processTB) Name() string { return t.name }
func (t *processTB) Log(args ...any) {
	t.logf("%s: %s", t.name, fmt.Sprint(args...))
}
func (t *processTB) Logf(format string, args ...any) {
	t.logf("%s: %s", t.name, fmt.Sprintf(format, args...))
}
func (t *processTB) Fail() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}
func (t *processTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *processTB) Error(args ...any)                 { t.Fail(); t.Log(args...) }
func (t *processTB) Errorf(format string, args ...any) { t.Fail(); t.Logf(format, args...) }
func (t *processTB) FailNow()                          { t.Fatal("FailNow") }
func (t *processTB) Fatal(args ...any)                 { t.Fail(); panic(fatalPanic{fmt.Sprint(args...)}) }
func (t *processTB) Fatalf(format string, args ...any) {
	t.Fail()
	panic(fatalPanic{fmt.Sprintf(format, args...)})
}
func (t *processTB) Skip(args ...any)                 { t.Fatal(args...) }
func (t *processTB) Skipf(format string, args ...any) { t.Fatalf(format, args...) }
func (t *processTB) SkipNow()                         { t.Fatal("SkipNow") }
func (t *processTB) Skipped() bool                    { return false }
func (t *processTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// close runs the cleanups, last first.
func (t *processTB) close() {
	t.mu.Lock()
	fs := slices.Clone(t.cleanups)
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
