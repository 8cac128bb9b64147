package status

import "github.com/prometheus/client_golang/prometheus"

// Results of a status write attempt, the "result" label of
// portico_status_writes_total.
const (
	ResultWritten  = "written"
	ResultSkipped  = "skipped-unchanged"
	ResultConflict = "conflict"
	ResultError    = "error"
)

// Metrics of the status writer.
type Metrics struct {
	QueueDepth prometheus.Gauge
	Writes     *prometheus.CounterVec
}

// NewMetrics creates the writer's metrics and registers them with reg when
// reg is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portico_status_queue_depth",
			Help: "Objects ready for their status to be checked or written (not those waiting for the end of their write interval).",
		}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_status_writes_total",
			Help: "Status write attempts by kind and result (written, skipped-unchanged, conflict, error).",
		}, []string{"kind", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.QueueDepth, m.Writes)
	}
	return m
}
