package install

import (
	"bytes"
	"fmt"
	"github.com/portico-dev/portico/internal/testenv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The envtest API server (kube-apiserver and etcd from
// hack/kube-binaries.sh) starts on first use, with exactly the chart's CRDs
// (charts/portico/crds, which TestChartCRDsMatchSources ties to their
// sources). Tests that need it skip locally without the binaries and fail in
// CI (CI=true).
var envtestState struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error // binaries missing
	fail error // binaries present, start failed
}

// logs collects the controller's and client-go's (klog) logs of the
// package's tests.
var logs = &logBuffer{}

func TestMain(m *testing.M) {
	h := slog.NewTextHandler(logs, nil)
	klog.SetSlogLogger(slog.New(h))
	ctrllog.SetLogger(logr.FromSlogHandler(h))
	code := m.Run()
	if envtestState.env != nil {
		_ = envtestState.env.Stop()
	}
	os.Exit(code)
}

// apiServer returns the admin config of the envtest API server.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	envtestState.once.Do(func() {
		assets, err := testenv.BinaryDir()
		if err != nil {
			envtestState.err = err
			return
		}
		env := &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     []string{filepath.Join(repoRoot(t), "charts", "portico", "crds")},
			ErrorIfCRDPathMissing: true,
		}
		// As on OpenShift: owner references may set blockOwnerDeletion only
		// with permission to set finalizers on the owner. Portico's owner
		// references to Gateways must work without that permission.
		env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
		envtestState.cfg, err = env.Start()
		if err != nil {
			envtestState.fail = fmt.Errorf("starting kube-apiserver and etcd: %w", err)
			return
		}
		envtestState.env = env
	})
	requireTool(t, "envtest (run hack/kube-binaries.sh)", envtestState.err)
	if envtestState.fail != nil {
		t.Fatal(envtestState.fail)
	}
	return envtestState.cfg
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Since returns the log lines written after offset, and the new offset.
func (b *logBuffer) Since(offset int) ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()[offset:]
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n"), b.buf.Len()
}

// Offset is the current end of the log.
func (b *logBuffer) Offset() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
