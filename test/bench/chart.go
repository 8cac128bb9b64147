package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Charts are the PNG files Render writes, by purpose.
var Charts = []struct{ File, Title string }{
	{"latency.png", "Propagation latency against route count"},
	{"translation.png", "Full and incremental translation time against route count"},
	{"memory.png", "Controller memory against route count"},
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// series is one line: y against N.
type series struct {
	name   string
	points map[int]float64
	dashed bool
}

func seriesOf[T any](name string, m map[string]T, y func(T) float64) series {
	s := series{name: name, points: map[int]float64{}}
	for k, v := range m {
		if n, err := strconv.Atoi(k); err == nil && !math.IsNaN(y(v)) {
			s.points[n] = y(v)
		}
	}
	return s
}

// orNaN is v, or NaN (no point) when v is missing or zero.
func orNaN(v *float64) float64 {
	if v == nil || *v == 0 {
		return math.NaN()
	}
	return *v
}

// Render writes the charts of r into dir.
func Render(r *Results, dir string) error {
	lat := []series{
		seriesOf("route p50", r.Propagation, func(l Latency) float64 { return l.P50 }),
		seriesOf("route p99", r.Propagation, func(l Latency) float64 { return l.P99 }),
		seriesOf("route p50, churn", r.PropagationChurn, func(l Latency) float64 { return l.P50 }),
		seriesOf("route p99, churn", r.PropagationChurn, func(l Latency) float64 { return l.P99 }),
		seriesOf("endpoint p50", r.EndpointPropagation, func(l Percentiles) float64 { return l.P50 }),
		seriesOf("endpoint p99", r.EndpointPropagation, func(l Percentiles) float64 { return l.P99 }),
		target("target p50 20 ms", r.Propagation, 20),
		target("target p99 100 ms", r.Propagation, 100),
	}
	tr := []series{
		seriesOf("full translation", r.TranslateFull, func(t TranslateFull) float64 { return t.Ms }),
		seriesOf("one changed route (follower)", r.TranslateIncremental, func(m Millis) float64 { return orNaN(&m.Ms) }),
		seriesOf("one changed route (in-process)", r.TranslateIncremental, func(m Millis) float64 { return orNaN(m.InProcessMs) }),
		{name: "target full", points: map[int]float64{1000: 25, 10000: 250}, dashed: true},
		{name: "target one route", points: map[int]float64{10000: 1}, dashed: true},
	}
	mem := []series{
		seriesOf("RSS", r.Memory, func(m Memory) float64 { return m.RSSMiB }),
		seriesOf("Go heap in use", r.Memory, func(m Memory) float64 { return m.HeapMiB }),
		{name: "target RSS", points: map[int]float64{1000: 120, 5000: 400}, dashed: true},
	}
	charts := []struct {
		file, title, y string
		logY           bool
		s              []series
	}{
		{Charts[0].File, Charts[0].Title, "milliseconds (log)", true, lat},
		{Charts[1].File, Charts[1].Title, "milliseconds (log)", true, tr},
		{Charts[2].File, Charts[2].Title, "MiB", false, mem},
	}
	for _, c := range charts {
		if err := lineChart(filepath.Join(dir, c.file), c.title, c.y, c.logY, c.s); err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
	}
	return nil
}

// target is a flat dashed line at y over the Ns of m.
func target[T any](name string, m map[string]T, y float64) series {
	s := series{name: name, points: map[int]float64{}, dashed: true}
	for k := range m {
		if n, err := strconv.Atoi(k); err == nil {
			s.points[n] = y
		}
	}
	return s
}

// lineChart plots every series on a log-scaled route-count axis, with
// room above the data for the legend.
func lineChart(file, title, ylabel string, logY bool, ss []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "HTTPRoutes"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, y := range s.points {
			if y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	floor := 0.0
	switch {
	case hi == 0:
	case logY:
		floor = math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = floor
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi))+1.5)
	default:
		p.Y.Min, p.Y.Max = 0, hi*1.6
	}
	drawn := 0
	for i, s := range ss {
		if len(s.points) == 0 {
			continue
		}
		ns := make([]int, 0, len(s.points))
		for n := range s.points {
			ns = append(ns, n)
		}
		sort.Ints(ns)
		xys := make(plotter.XYs, len(ns))
		for j, n := range ns {
			xys[j] = plotter.XY{X: float64(n), Y: math.Max(s.points[n], floor)}
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		col := palette[i%len(palette)]
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			pts.Shape = draw.BoxGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
		drawn++
	}
	if drawn == 0 {
		// An empty chart still renders, with a note instead of lines.
		p.Title.Text += " (no data)"
		p.X.Scale = plot.LinearScale{}
		p.X.Tick.Marker = plot.DefaultTicks{}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}
