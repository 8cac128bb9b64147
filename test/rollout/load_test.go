package rollout

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// load is a constant stream of requests through a Gateway: workers
// goroutines, each a client with its own keep-alive connection, one POST
// every interval (0: back to back, so that a connection nearly always has
// a request in flight, the case a proxy that stops without draining
// breaks). POST, because a client may not retry it: Go's net/http
// (as most clients) silently retries an idempotent request that a closing
// connection cut, which would hide every lost request; a POST it retries
// only when it never wrote it. A request fails on a transport error, a
// status other than 200, or an answer not from the echo backend.
type load struct {
	url      string
	stop     chan struct{}
	wg       sync.WaitGroup
	ok, fail atomic.Int64

	mu     sync.Mutex
	errs   map[string]int // error → count
	served map[string]int // backend Pod → count
}

func startLoad(t *testing.T, url string, workers int, interval time.Duration) *load {
	t.Helper()
	l := &load{url: url, stop: make(chan struct{}), errs: map[string]int{}, served: map[string]int{}}
	for range workers {
		l.wg.Go(func() { l.worker(interval) })
	}
	t.Cleanup(l.halt)
	return l
}

func (l *load) worker(interval time.Duration) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if tick != nil {
			select {
			case <-l.stop:
				return
			case <-tick:
			}
		}
		pod, err := l.once(client)
		l.mu.Lock()
		if err != nil {
			l.fail.Add(1)
			l.errs[err.Error()]++
		} else {
			l.ok.Add(1)
			l.served[pod]++
		}
		l.mu.Unlock()
	}
}

func (l *load) once(client *http.Client) (string, error) {
	resp, err := client.Post(l.url, "text/plain", strings.NewReader("portico rollout load"))
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("reading the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	var echo struct{ Pod, Method string }
	if err := json.Unmarshal(body, &echo); err != nil || echo.Pod == "" || echo.Method != http.MethodPost {
		return "", fmt.Errorf("not the echo backend's answer: %.200s", body)
	}
	return echo.Pod, nil
}

// halt stops the workers and waits for them (idempotent).
func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitServed waits until n requests have succeeded.
func (l *load) waitServed(t *testing.T, n int64, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d requests served", n), func() error {
		if got := l.ok.Load(); got < n {
			return fmt.Errorf("%d served, %d failed", got, l.fail.Load())
		}
		return nil
	})
}

// check halts the load and fails the test on any failed request,
// naming the errors; it logs the totals.
func (l *load) check(t *testing.T, what string) {
	t.Helper()
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("FIGURE %s: %d requests served, %d failed", what, l.ok.Load(), l.fail.Load())
	if l.fail.Load() > 0 {
		var lines []string
		for e, n := range l.errs {
			lines = append(lines, fmt.Sprintf("%d× %s", n, e))
		}
		sort.Strings(lines)
		t.Errorf("%s: %d of %d requests failed:\n%s", what, l.fail.Load(), l.ok.Load()+l.fail.Load(), strings.Join(lines, "\n"))
	}
	if l.ok.Load() == 0 {
		t.Errorf("%s: no request was served", what)
	}
}
