package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"carve.dev/carve/test/bench/results"
)

// drawAll writes the run's plots into dir: latency and throughput per
// operation, raw against Carve; the scale curves; RSS by volume count.
func drawAll(r *results.Run, dir string) error {
	for _, d := range []struct {
		file string
		draw func(*results.Run) (*plot.Plot, vg.Length, error)
	}{
		{"bench-latency.png", func(r *results.Run) (*plot.Plot, vg.Length, error) {
			return bars(r, "s", "Latency per operation (median), seconds")
		}},
		{"bench-throughput.png", func(r *results.Run) (*plot.Plot, vg.Length, error) {
			return bars(r, "MiB/s", "Throughput (median), MiB/s")
		}},
		{"bench-scale.png", scaleCurves},
		{"bench-rss.png", rssCurve},
	} {
		p, h, err := d.draw(r)
		if err != nil {
			return fmt.Errorf("%s: %w", d.file, err)
		}
		if p == nil {
			continue // nothing of that kind in the run
		}
		if err := p.Save(10*vg.Inch, h, filepath.Join(dir, d.file)); err != nil {
			return fmt.Errorf("save %s: %w", d.file, err)
		}
	}
	return nil
}

// bars draws the rows in unit that have a raw figure as horizontal bar
// pairs, raw beside Carve.
func bars(r *results.Run, unit, title string) (*plot.Plot, vg.Length, error) {
	var names []string
	var raw, carve plotter.Values
	for _, row := range r.Rows {
		if row.Unit == unit && row.Raw != 0 && row.Section != "scale" {
			names, raw, carve = append(names, row.Op), append(raw, row.Raw), append(carve, row.Carve)
		}
	}
	if len(names) == 0 {
		return nil, 0, nil
	}
	// The first row at the top.
	slices.Reverse(names)
	slices.Reverse(raw)
	slices.Reverse(carve)
	p := plot.New()
	p.Title.Text = title
	w := vg.Points(8)
	for i, s := range []struct {
		label string
		vs    plotter.Values
	}{{"raw", raw}, {"carve", carve}} {
		b, err := plotter.NewBarChart(s.vs, w)
		if err != nil {
			return nil, 0, err
		}
		b.Horizontal = true
		b.Offset = vg.Length(i*2-1) * w / 2
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.Legend.Top = true
	p.X.Min = 0
	p.X.Max = slices.Max(append(slices.Clone(raw), carve...)) * 1.2 // room for the legend
	p.NominalY(names...)
	p.Add(plotter.NewGrid())
	return p, vg.Length(len(names))*20 + 80, nil
}

// scaleCurves draws each scale operation's p50 against the volume count.
func scaleCurves(r *results.Run) (*plot.Plot, vg.Length, error) {
	if len(r.Scale) == 0 {
		return nil, 0, nil
	}
	p := plot.New()
	p.Title.Text = "p50 latency against the number of volumes in the VG"
	p.X.Label.Text = "volumes"
	p.Y.Label.Text = "seconds"
	var ops []string
	for op := range r.Scale[len(r.Scale)-1].Ops {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var lines []any
	top := 0.0
	for _, op := range ops {
		var xys plotter.XYs
		for _, pt := range r.Scale {
			if l, ok := pt.Ops[op]; ok {
				xys = append(xys, plotter.XY{X: float64(pt.N), Y: l.P50})
				top = max(top, l.P50)
			}
		}
		lines = append(lines, op, xys)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, 0, err
	}
	// A ladder of 10 to 1000 reads on a log axis; the legend gets the
	// top of the plot to itself.
	if first, last := r.Scale[0].N, r.Scale[len(r.Scale)-1].N; first > 0 && last >= 10*first {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = 0, top*1.6
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p, 6 * vg.Inch, nil
}

// rssCurve draws carve's resident memory against the volume count.
func rssCurve(r *results.Run) (*plot.Plot, vg.Length, error) {
	if len(r.Scale) == 0 {
		return nil, 0, nil
	}
	p := plot.New()
	p.Title.Text = "carve standalone resident memory (VmRSS)"
	p.X.Label.Text = "volumes"
	p.Y.Label.Text = "MiB"
	var xys plotter.XYs
	for _, pt := range r.Scale {
		xys = append(xys, plotter.XY{X: float64(pt.N), Y: float64(pt.RSSBytes) / (1 << 20)})
	}
	if err := plotutil.AddLinePoints(p, "RSS", xys); err != nil {
		return nil, 0, err
	}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p, 4 * vg.Inch, nil
}
