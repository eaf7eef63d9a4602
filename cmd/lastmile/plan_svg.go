package main

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/plan"
)

// The plot of `lastmile plan`: two panels side by side, drawn by hand
// (no plotting dependency): throughput against cores with the target
// line, and stall against load.

const (
	svgW, svgH   = 960, 420
	panelW       = 440
	padL, padR   = 78, 16
	padT, padB   = 48, 64
	plotW, plotH = panelW - padL - padR, svgH - padT - padB
)

// axes maps data to one panel's pixels.
type axes struct {
	x0           float64 // the panel's left edge
	xmax, ymax   float64
	xtick, ytick float64
}

func (a axes) px(x float64) float64 { return a.x0 + padL + x/a.xmax*plotW }
func (a axes) py(y float64) float64 { return padT + plotH - y/a.ymax*plotH }

// niceStep returns a tick step of 1, 2 or 5 times a power of ten giving
// about n ticks up to max.
func niceStep(max float64, n int) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// frame draws a panel's axes, grid, ticks, title and labels.
func (a axes) frame(b *strings.Builder, title, xlabel, ylabel string, xfmt, yfmt func(float64) string) {
	fmt.Fprintf(b, `<text x="%.0f" y="26" font-size="15" font-weight="bold">%s</text>`+"\n", a.x0+padL, html.EscapeString(title))
	for x := 0.0; x <= a.xmax+1e-9; x += a.xtick {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", a.px(x), padT, a.px(x), padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", a.px(x), padT+plotH+18, xfmt(x))
	}
	for y := 0.0; y <= a.ymax+1e-9; y += a.ytick {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", a.px(0), a.py(y), a.px(a.xmax), a.py(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", a.px(0)-6, a.py(y)+4, yfmt(y))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", a.px(0), padT, plotW, plotH)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="13" text-anchor="middle">%s</text>`+"\n", a.px(a.xmax/2), svgH-22, html.EscapeString(xlabel))
	cx, cy := a.x0+18, float64(padT+plotH/2)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n", cx, cy, cx, cy, html.EscapeString(ylabel))
}

func legend(b *strings.Builder, x, y float64, items [][2]string) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="230" height="%d" fill="white" fill-opacity="0.85"/>`+"\n", x-6, y-10, 16*len(items)+4)
	for i, it := range items {
		yy := y + float64(16*i)
		fmt.Fprintf(b, `<g transform="translate(%.1f %.1f)">%s</g>`, x, yy, it[0])
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12">%s</text>`+"\n", x+16, yy+4, html.EscapeString(it[1]))
	}
}

// planSVG draws the plot of out.
func planSVG(out planOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	throughputPanel(&b, out)
	stallPanel(&b, out)
	b.WriteString("</svg>\n")
	return b.String()
}

func throughputPanel(b *strings.Builder, out planOutput) {
	r, p := out.Measured, out.Prediction
	c := r.Measured.Curve
	xmax := float64(max(out.Resources.HostCores, p.CoresPerHost, 1))
	for _, pt := range r.Points {
		xmax = math.Max(xmax, pt.Cores)
	}
	if v := out.Validation; v != nil {
		xmax = math.Max(xmax, float64(v.Cores))
	}
	xmax = math.Min(xmax+1, 64)
	ymax := math.Max(p.HostRate, c.Rate(xmax))
	for _, pt := range r.Points {
		ymax = math.Max(ymax, pt.Rate)
	}
	ymax *= 1.15
	a := axes{x0: 0, xmax: xmax, ymax: ymax, xtick: math.Max(1, niceStep(xmax, 8)), ytick: niceStep(ymax, 6)}
	a.ymax = math.Ceil(ymax/a.ytick) * a.ytick
	a.frame(b, "Throughput against cores", "cores (CPU quota of the process)", "samples/s (output rows delivered)",
		func(x float64) string { return fmt.Sprintf("%g", x) }, func(y float64) string { return shortRate(y) })
	var pts []string
	for i := 0; i <= 100; i++ {
		x := xmax * float64(i) / 100
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", a.px(x), a.py(c.Rate(x))))
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="8 5"/>`+"\n",
		a.px(0), a.py(p.HostRate), a.px(xmax), a.py(p.HostRate))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="#d62728" text-anchor="end">target %s samples/s</text>`+"\n",
		a.px(xmax)-6, a.py(p.HostRate)-6, commaRate(p.HostRate))
	for _, pt := range r.Points {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="5" fill="#1f77b4"/>`+"\n", a.px(pt.Cores), a.py(pt.Rate))
	}
	items := [][2]string{
		{`<line x1="0" y1="0" x2="12" y2="0" stroke="#1f77b4" stroke-width="2"/>`, "fitted curve"},
		{`<circle cx="6" cy="0" r="5" fill="#1f77b4"/>`, "measured"},
		{`<line x1="0" y1="0" x2="12" y2="0" stroke="#d62728" stroke-width="2" stroke-dasharray="4 2"/>`, "target"},
	}
	if p.CoresPerHost > 0 && float64(p.CoresPerHost) <= xmax {
		x, y := a.px(float64(p.CoresPerHost)), a.py(c.Rate(float64(p.CoresPerHost)))
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="none" stroke="#2ca02c" stroke-width="2.5" transform="rotate(45 %.1f %.1f)"/>`+"\n", x-5, y-5, x, y)
		items = append(items, [2]string{`<rect x="1" y="-5" width="10" height="10" fill="none" stroke="#2ca02c" stroke-width="2.5"/>`, "predicted size: " + count(p.CoresPerHost, "core", "cores")})
	}
	if v := out.Validation; v != nil {
		x, y := a.px(float64(v.Cores)), a.py(v.Capacity.Rate)
		fmt.Fprintf(b, `<path d="M %.1f %.1f l 6 10 l -12 0 z" fill="#ff7f0e"/>`+"\n", x, y-6)
		items = append(items, [2]string{`<path d="M 6 -6 l 6 10 l -12 0 z" fill="#ff7f0e"/>`, fmt.Sprintf("validated: %s samples/s", shortRate(v.Capacity.Rate))})
	}
	legend(b, a.px(0)+12, padT+16, items)
}

func stallPanel(b *strings.Builder, out planOutput) {
	r := out.Measured
	xmax, ymax := 1.2, 0.05
	for _, s := range r.Stall {
		xmax = math.Max(xmax, s.Load+0.1)
		ymax = math.Max(ymax, s.Stall)
	}
	ymax = math.Max(ymax, plan.StallAt(xmax))
	ymax = math.Min(ymax*1.15, 1)
	a := axes{x0: panelW + 40, xmax: 100 * xmax, ymax: 100 * ymax, xtick: niceStep(100*xmax, 6), ytick: niceStep(100*ymax, 6)}
	a.ymax = math.Ceil(a.ymax/a.ytick) * a.ytick
	a.frame(b, "Trainer stall against load", "trainer demand (% of measured capacity)", "stall (% of trainer time on an empty ring)",
		func(x float64) string { return fmt.Sprintf("%g%%", x) }, func(y float64) string { return fmt.Sprintf("%g%%", y) })
	var pts []string
	for i := 0; i <= 100; i++ {
		x := xmax * float64(i) / 100
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", a.px(100*x), a.py(100*plan.StallAt(x))))
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-width="1.5" stroke-dasharray="8 5"/>`+"\n",
		a.px(0), a.py(1), a.px(a.xmax), a.py(1))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="3 3"/>`+"\n", a.px(90), padT, a.px(90), padT+plotH)
	for _, s := range r.Stall {
		fill := "#1f77b4"
		if s.Slots != r.Slots {
			fill = "#9467bd"
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>`+"\n", a.px(100*s.Load), a.py(100*s.Stall), fill)
	}
	items := [][2]string{
		{`<line x1="0" y1="0" x2="12" y2="0" stroke="#1f77b4" stroke-width="2"/>`, "model: 1 − capacity/demand"},
		{`<circle cx="6" cy="0" r="5" fill="#1f77b4"/>`, fmt.Sprintf("measured, %d-slot rings", r.Slots)},
		{`<line x1="0" y1="0" x2="12" y2="0" stroke="#d62728" stroke-width="1.5" stroke-dasharray="4 2"/>`, "1% (the bound at 90% load)"},
	}
	if hasDeeper(r.Stall, r.Slots) {
		items = append(items, [2]string{`<circle cx="6" cy="0" r="5" fill="#9467bd"/>`, "measured, deeper rings"})
	}
	legend(b, a.px(0)+12, padT+16, items)
}

func hasDeeper(s []bench.StallPoint, slots int) bool {
	for _, p := range s {
		if p.Slots != slots {
			return true
		}
	}
	return false
}

// shortRate prints a rate for an axis: 950, 12k, 1.5M.
func shortRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e5)/10)
	case v >= 1e3:
		return fmt.Sprintf("%gk", math.Round(v/1e2)/10)
	}
	return fmt.Sprintf("%g", math.Round(v))
}

// planHTML is one self-contained page: the answer, the plot, the tables
// and the JSON.
func planHTML(answer, text, svg, js string) string {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>lastmile plan</title>\n")
	b.WriteString("<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>\n")
	b.WriteString("<h1>lastmile plan</h1>\n<p>" + html.EscapeString(answer) + "</p>\n")
	b.WriteString(svg)
	b.WriteString("<h2>Tables</h2>\n<pre>" + html.EscapeString(text) + "</pre>\n")
	b.WriteString("<h2>JSON</h2>\n<pre>" + html.EscapeString(js) + "</pre>\n</body></html>\n")
	return b.String()
}
