package export

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"codeberg.org/stacktop/stacktop/profile"
)

// FlameGraphOptions tune the SVG flame graph.
type FlameGraphOptions struct {
	// Title is drawn above the graph; empty means "Flame Graph: command".
	Title string
	// Width of the image in pixels; 0 means 1200.
	Width int
	// SortByTotal orders siblings widest first (speedscope's "left heavy")
	// instead of alphabetically as flamegraph.pl does. Alphabetical order
	// keeps a frame in the same place from one recording to the next.
	SortByTotal bool
	// Base, when set, makes a differential flame graph, as Brendan Gregg's
	// difffolded.pl and flamegraph.pl draw one: the frames and widths are
	// the profile's, and each frame is red where its share of all
	// samples grew since Base and blue where it shrank, the deeper the
	// more it changed. Frames only Base has are not drawn.
	Base *profile.Profile
}

// Geometry of the drawing, in pixels; the values are flamegraph.pl's so the
// result looks familiar.
const (
	fgDefaultWidth = 1200
	fgFrameHeight  = 16
	fgFontSize     = 12
	fgFontWidth    = 0.59 // average glyph width as a fraction of the font size
	fgPadX         = 10
	fgPadTop       = fgFontSize*3 + 8 // title and controls
	fgPadBottom    = fgFontSize*2 + 10
	// fgMinShare is the narrowest frame drawn, as a share of all samples:
	// below it a frame is a sliver nobody can read or click, and a deep
	// profile would otherwise spend most of its bytes on them.
	fgMinShare = 0.001
	// fgMatchFill is the colour of frames a search matched.
	fgMatchFill = "rgb(230,0,230)"
)

// fgFrame is one rectangle to draw.
type fgFrame struct {
	name, module string
	start, n     int64 // samples to the left of the frame, and the frame's own
	depth        int   // 0 is the synthetic root "all"
	// delta is, in a differential graph, the change of the frame's share
	// of all samples since the base profile, in percentage points.
	delta float64
}

// fgUnit says what a frame's samples amount to: time (CPU time in an
// on-CPU profile, whose samples weigh the CPU time their thread used in
// periods; wall time under --idle), or plain samples where the profile
// has no period (read from folded stacks).
type fgUnit struct {
	period time.Duration
	kind   string // "CPU" or "wall"
}

func fgUnitOf(p *profile.Profile) fgUnit {
	u := fgUnit{period: p.Period, kind: "CPU"}
	if p.Wall {
		u.kind = "wall"
	}
	return u
}

// amount is n samples in the profile's unit: "3.00 s CPU", "1 sample".
func (u fgUnit) amount(n int64) string {
	if u.period <= 0 {
		if n == 1 {
			return "1 sample"
		}
		return strconv.FormatInt(n, 10) + " samples"
	}
	d := time.Duration(n) * u.period
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s " + u.kind
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms " + u.kind
	}
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + " µs " + u.kind
}

// WriteFlameGraph draws the profile as a self-contained SVG flame graph:
// the root at the bottom, each frame as wide as its share of the samples,
// callees stacked above callers. Frames narrower than 0.1% of the samples
// are left out (their callers keep their full width). Each frame carries a
// <title> tooltip "name (AMOUNT, P%)", AMOUNT the frame's CPU or wall time
// ("3.00 s CPU") or, for a profile without a period, its samples (a
// differential graph adds ", was Q%", the share in the base), and its
// module's file name. Embedded
// JavaScript (no external files) shows the hovered frame's name, module,
// samples and share on the details line, zooms into a clicked frame, resets
// the zoom, and searches frames by regular expression (the Search button or
// Ctrl-F), highlighting matches and showing the share of samples they hold.
func WriteFlameGraph(w io.Writer, p *profile.Profile, opt FlameGraphOptions) error {
	width := opt.Width
	if width <= 0 {
		width = fgDefaultWidth
	}
	title := opt.Title
	if title == "" {
		title = "Flame Graph"
		if p.Command != "" {
			title += ": " + p.Command
		}
	}

	root := p.Aggregate(0).Tree()
	total := root.Total
	minSamples := int64(float64(total)*fgMinShare + 0.5)
	if minSamples < 1 {
		minSamples = 1
	}
	var baseRoot *profile.Node
	if opt.Base != nil {
		baseRoot = opt.Base.Aggregate(0).Tree()
	}
	var frames []fgFrame
	omitted := int64(0) // frames left out, for the footer
	maxDepth := 0
	maxDelta := 0.0 // the largest change of a frame's share, for the colours
	var walk func(n, base *profile.Node, start int64, depth int)
	walk = func(n, base *profile.Node, start int64, depth int) {
		f := fgFrame{name: n.Name, module: n.Module, start: start, n: n.Total, depth: depth}
		if baseRoot != nil {
			f.delta = shareDelta(n, base, total, baseRoot.Total)
			if depth > 0 {
				maxDelta = max(maxDelta, math.Abs(f.delta))
			}
		}
		frames = append(frames, f)
		maxDepth = max(maxDepth, depth)
		kids := n.Children
		if !opt.SortByTotal {
			kids = append([]*profile.Node(nil), kids...)
			sort.SliceStable(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
		}
		// Self samples sit to the right of the callees in flamegraph.pl;
		// here too, so the callees start at the frame's left edge.
		x := start
		for _, c := range kids {
			if c.Total >= minSamples {
				walk(c, childNamed(base, c), x, depth+1)
			} else {
				omitted++
			}
			x += c.Total
		}
	}
	if total > 0 {
		walk(root, baseRoot, 0, 0)
	}
	unit := fgUnitOf(p)

	imageHeight := fgPadTop + (maxDepth+1)*fgFrameHeight + fgPadBottom
	plotWidth := float64(width - 2*fgPadX)
	scale := 0.0
	if total > 0 {
		scale = plotWidth / float64(total)
	}

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
`, width, imageHeight, width, imageHeight)
	fmt.Fprintf(bw, "<!-- stacktop flame graph: %d samples, %d frames drawn, %d narrower than %.1f%% omitted -->\n",
		total, len(frames), omitted, fgMinShare*100)
	bw.WriteString("<defs><linearGradient id=\"bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\"><stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient></defs>\n")
	bw.WriteString(fgStyle)
	bw.WriteString("<script type=\"text/ecmascript\"><![CDATA[\n")
	fmt.Fprintf(bw, "var fg = {total: %d, padX: %d, plotWidth: %s, fontSize: %d, fontWidth: %s, frameHeight: %d, matchFill: %q};\n",
		total, fgPadX, strconv.FormatFloat(plotWidth, 'f', -1, 64), fgFontSize,
		strconv.FormatFloat(fgFontWidth, 'f', -1, 64), fgFrameHeight, fgMatchFill)
	bw.WriteString(fgScript)
	bw.WriteString("]]></script>\n")

	fmt.Fprintf(bw, `<rect x="0" y="0" width="%d" height="%d" fill="url(#bg)"/>`+"\n", width, imageHeight)
	fmt.Fprintf(bw, `<text id="title" x="%d" y="%d" text-anchor="middle" font-size="%d">%s</text>`+"\n",
		width/2, fgFontSize*2, fgFontSize+5, xmlEscape(title))
	fmt.Fprintf(bw, `<text id="unzoom" class="control hide" x="%d" y="%d">Reset Zoom</text>`+"\n", fgPadX, fgFontSize*2)
	fmt.Fprintf(bw, `<text id="search" class="control" x="%d" y="%d" text-anchor="end">Search</text>`+"\n", width-fgPadX, fgFontSize*2)
	fmt.Fprintf(bw, `<text id="details" x="%d" y="%d"> </text>`+"\n", fgPadX, imageHeight-fgFontSize/2-2)
	fmt.Fprintf(bw, `<text id="matched" x="%d" y="%d" text-anchor="end"> </text>`+"\n", width-fgPadX, imageHeight-fgFontSize/2-2)

	bw.WriteString(`<g id="frames">` + "\n")
	for _, f := range frames {
		x := float64(fgPadX) + float64(f.start)*scale
		fw := float64(f.n) * scale
		y := imageHeight - fgPadBottom - (f.depth+1)*fgFrameHeight
		share := 100 * float64(f.n) / float64(total)
		amount := unit.amount(f.n)
		was := "" // in a differential graph, the frame's share in the base
		if baseRoot != nil {
			was = strconv.FormatFloat(max(share-f.delta, 0), 'f', 2, 64) + "%"
		}
		// data-s/data-n/data-d are the frame in sample units, which is
		// what the script zooms with; pixel positions are derived.
		// data-m is the module's file name and data-a the frame's amount
		// (time or samples), for the details line.
		fmt.Fprintf(bw, `<g class="f" data-s="%d" data-n="%d" data-d="%d" data-a="%s"`, f.start, f.n, f.depth, xmlEscape(amount))
		if f.module != "" {
			fmt.Fprintf(bw, ` data-m="%s"`, xmlEscape(profile.ModuleBase(f.module)))
		}
		if was != "" {
			fmt.Fprintf(bw, ` data-b="%s"`, was)
		}
		bw.WriteString(">")
		if was != "" {
			fmt.Fprintf(bw, `<title>%s (%s, %.2f%%, was %s)</title>`, xmlEscape(f.name), xmlEscape(amount), share, was)
		} else {
			fmt.Fprintf(bw, `<title>%s (%s, %.2f%%)</title>`, xmlEscape(f.name), xmlEscape(amount), share)
		}
		fill := fgColor(f)
		if baseRoot != nil {
			fill = fgDiffColor(f.delta, maxDelta)
		}
		fmt.Fprintf(bw, `<rect x="%s" y="%d" width="%s" height="%d" fill="%s" rx="2" ry="2"/>`,
			fgCoord(x), y, fgCoord(fw), fgFrameHeight-1, fill)
		fmt.Fprintf(bw, `<text x="%s" y="%s">%s</text>`,
			fgCoord(x+3), fgCoord(float64(y)+fgFrameHeight-4.5), xmlEscape(fgLabel(f.name, fw)))
		bw.WriteString("</g>\n")
	}
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

// fgCoord formats a pixel coordinate; two decimals are finer than any
// screen and keep the file small.
// shareDelta is the change, in percentage points of all samples, of a
// frame's share from base (nil: the frame is new) to n.
func shareDelta(n, base *profile.Node, total, baseTotal int64) float64 {
	now := 100 * float64(n.Total) / float64(total)
	if base == nil || baseTotal == 0 {
		return now
	}
	return now - 100*float64(base.Total)/float64(baseTotal)
}

// childNamed is parent's child that is the same frame as c, nil if none.
func childNamed(parent, c *profile.Node) *profile.Node {
	if parent == nil {
		return nil
	}
	for _, b := range parent.Children {
		if b.Name == c.Name && b.Module == c.Module {
			return b
		}
	}
	return nil
}

// fgDiffColor is flamegraph.pl's differential colouring: red for a frame
// that grew, blue for one that shrank, white for no change, saturated at
// the largest change in the graph.
func fgDiffColor(delta, maxDelta float64) string {
	v := 0
	if maxDelta > 0 {
		v = int(210 * math.Abs(delta) / maxDelta)
	}
	fade := strconv.Itoa(255 - v)
	switch {
	case delta > 0:
		return "rgb(255," + fade + "," + fade + ")"
	case delta < 0:
		return "rgb(" + fade + "," + fade + ",255)"
	}
	return "rgb(255,255,255)"
}

func fgCoord(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// fgLabel is the part of name that fits in a frame w pixels wide: all of
// it, a prefix ending in "..", or nothing. The script uses the same rule
// when it zooms.
func fgLabel(name string, w float64) string {
	fits := int((w - 6) / (fgFontSize * fgFontWidth))
	if fits < 3 {
		return ""
	}
	r := []rune(name)
	if len(r) <= fits {
		return name
	}
	return string(r[:fits-2]) + ".."
}

// xmlEscape escapes s for XML text or a quoted attribute, replacing bytes
// that are not valid UTF-8 or not allowed in XML with U+FFFD.
func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s)) // writes to a Builder cannot fail
	return b.String()
}

// fgColor picks a deterministic colour: flamegraph.pl's warm palette,
// chosen by a hash of the function name so a function keeps its colour
// across graphs; unsymbolised frames (no function, named module+0xoff) are
// grey-blue, like flamegraph.pl's "unknown", and the root is grey.
func fgColor(f fgFrame) string {
	if f.depth == 0 {
		return "rgb(200,200,200)"
	}
	if f.module != "" && strings.HasPrefix(f.name, profile.ModuleBase(f.module)+"+0x") || strings.HasPrefix(f.name, "0x") {
		return "rgb(160,170,200)"
	}
	h := fnv.New32a()
	h.Write([]byte(f.name))
	v := h.Sum32()
	r := 205 + int(v%51)
	g := int((v >> 8) % 231)
	b := int((v >> 16) % 56)
	return "rgb(" + strconv.Itoa(r) + "," + strconv.Itoa(g) + "," + strconv.Itoa(b) + ")"
}

const fgStyle = `<style type="text/css">
text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { font-size: 17px; }
.control { cursor: pointer; }
.control:hover { text-decoration: underline; }
.hide { display: none; }
.f { cursor: pointer; }
.f:hover rect { stroke: black; stroke-width: 0.5; }
.f text { pointer-events: none; }
.parent rect { opacity: 0.5; }
</style>
`

// fgScript is the interactive part. Frames carry their position in sample
// units (data-s start, data-n width, data-d depth); zooming to frame Z shows
// the frames inside Z's sample range at depth >= Z's, scaled to the full
// width, keeps Z's ancestors as faded full-width bars, and hides the rest.
// The search share is the union of the matching frames' sample ranges, so a
// match nested in another match is not counted twice.
const fgScript = `
var frames = [], zoomed = null, searchRe = null;
function attr(e, n) { return parseInt(e.getAttribute(n), 10); }
function frameName(g) {
	var t = g.getElementsByTagName("title")[0].textContent;
	var m = /^([\s\S]*) \([^()]*\)$/.exec(t);
	return m ? m[1] : t;
}
function label(name, w) {
	var fits = Math.floor((w - 6) / (fg.fontSize * fg.fontWidth));
	if (fits < 3) return "";
	if (name.length <= fits) return name;
	return name.substring(0, fits - 2) + "..";
}
function layout() {
	var zs = 0, zn = fg.total, zd = 0;
	if (zoomed) { zs = zoomed.s; zn = zoomed.n; zd = zoomed.d; }
	var scale = fg.plotWidth / zn;
	for (var i = 0; i < frames.length; i++) {
		var f = frames[i], x, w;
		f.g.classList.remove("hide");
		f.g.classList.remove("parent");
		if (f.d < zd) {
			if (f.s <= zs && f.s + f.n >= zs + zn) {
				x = fg.padX; w = fg.plotWidth;
				if (zoomed) f.g.classList.add("parent");
			} else { f.g.classList.add("hide"); continue; }
		} else if (f.s >= zs && f.s + f.n <= zs + zn) {
			x = fg.padX + (f.s - zs) * scale; w = f.n * scale;
		} else { f.g.classList.add("hide"); continue; }
		f.rect.setAttribute("x", x.toFixed(2));
		f.rect.setAttribute("width", w.toFixed(2));
		f.text.setAttribute("x", (x + 3).toFixed(2));
		f.text.textContent = label(f.name, w);
	}
}
function zoom(f) {
	zoomed = (!f || f.d === 0) ? null : f;
	document.getElementById("unzoom").classList.toggle("hide", zoomed === null);
	layout();
}
function matchedShare(re) {
	var spans = [];
	for (var i = 0; i < frames.length; i++) {
		var f = frames[i], hit = re !== null && f.d > 0 && re.test(f.name);
		f.rect.setAttribute("fill", hit ? fg.matchFill : f.fill);
		if (hit) spans.push([f.s, f.s + f.n]);
	}
	spans.sort(function (a, b) { return a[0] - b[0]; });
	var covered = 0, end = -1;
	for (var j = 0; j < spans.length; j++) {
		var s = Math.max(spans[j][0], end);
		if (spans[j][1] > s) { covered += spans[j][1] - s; end = spans[j][1]; }
	}
	return fg.total > 0 ? covered / fg.total : 0;
}
function search(term) {
	var matched = document.getElementById("matched");
	if (!term) {
		searchRe = null; matchedShare(null); matched.textContent = " ";
		document.getElementById("search").textContent = "Search";
		return;
	}
	try { searchRe = new RegExp(term); }
	catch (e) { searchRe = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")); }
	var share = matchedShare(searchRe);
	matched.textContent = "Matched: " + (100 * share).toFixed(1) + "%";
	document.getElementById("search").textContent = "Reset Search";
}
// details is the hover line: name, module, amount (CPU or wall time, or
// samples), share of all samples and, in a differential graph, the share
// in the base.
function details(f) {
	var d = f.name;
	if (f.m) d += " in " + f.m;
	return d + " (" + f.a + ", " + (fg.total > 0 ? 100 * f.n / fg.total : 0).toFixed(2) + "%" +
		(f.b ? ", was " + f.b : "") + ")";
}
function askSearch() {
	var term = prompt("Search frames (regular expression):", searchRe ? searchRe.source : "");
	if (term !== null) search(term);
}
function init() {
	var root = document.getElementById("frames");
	if (!root || frames.length > 0) return;
	var gs = root.getElementsByTagName("g");
	for (var i = 0; i < gs.length; i++) {
		var g = gs[i], rect = g.getElementsByTagName("rect")[0];
		var f = {g: g, rect: rect, text: g.getElementsByTagName("text")[0],
			s: attr(g, "data-s"), n: attr(g, "data-n"), d: attr(g, "data-d"),
			name: frameName(g), m: g.getAttribute("data-m") || "", a: g.getAttribute("data-a") || "", b: g.getAttribute("data-b") || "",
			fill: rect.getAttribute("fill")};
		frames.push(f);
		g.addEventListener("click", (function (f) { return function () { zoom(f); }; })(f));
		g.addEventListener("mouseover", (function (f) { return function () {
			document.getElementById("details").textContent = details(f);
		}; })(f));
		g.addEventListener("mouseout", function () { document.getElementById("details").textContent = " "; });
	}
	document.getElementById("unzoom").addEventListener("click", function () { zoom(null); });
	document.getElementById("search").addEventListener("click", function () {
		if (searchRe) { search(""); return; }
		askSearch();
	});
	window.addEventListener("keydown", function (e) {
		if ((e.ctrlKey || e.metaKey) && (e.key === "f" || e.key === "F")) {
			e.preventDefault();
			askSearch();
		} else if (e.key === "Escape") { search(""); zoom(null); }
	});
}
// The script comes before the frames in the file, so it runs before they
// are parsed: it may only look for them once the document has loaded.
if (typeof window !== "undefined") {
	window.addEventListener("load", init);
	if (typeof document !== "undefined" && document.readyState === "complete") init();
}
`
