package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one Prometheus text-format sample.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a scrape of /metrics.
type Samples []Sample

// ParseMetrics parses the Prometheus text exposition format (what
// promhttp serves without content negotiation) with the Prometheus
// client's own parser (expfmt), and flattens it into samples as the text
// shows them: a histogram is its name_bucket (with le), name_sum and
// name_count samples, a summary its quantiles, name_sum and name_count.
// Malformed input is an error.
func ParseMetrics(r io.Reader) (Samples, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	names := slices.Sorted(maps.Keys(families))
	var out Samples
	for _, name := range names {
		vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, families[name])
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", name, err)
		}
		for _, smp := range vec {
			s := Sample{Name: string(smp.Metric[model.MetricNameLabel]), Labels: make(map[string]string, len(smp.Metric)-1),
				Value: float64(smp.Value)}
			for k, v := range smp.Metric {
				if k != model.MetricNameLabel {
					s.Labels[string(k)] = string(v)
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Sum adds the values of every sample called name whose labels include
// match (label → value).
func (ss Samples) Sum(name string, match map[string]string) float64 {
	var total float64
next:
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		total += s.Value
	}
	return total
}

// Has reports whether any sample is called name.
func (ss Samples) Has(name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}
