package export

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"codeberg.org/stacktop/stacktop/internal/testsupport/fuzzbudget"
	"codeberg.org/stacktop/stacktop/profile"
)

// xnode is a generic XML element, enough to walk an SVG without knowing it.
type xnode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []xnode    `xml:",any"`
}

func (n *xnode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *xnode) child(local string) *xnode {
	for i := range n.Children {
		if n.Children[i].XMLName.Local == local {
			return &n.Children[i]
		}
	}
	return nil
}

func (n *xnode) walk(visit func(*xnode)) {
	visit(n)
	for i := range n.Children {
		n.Children[i].walk(visit)
	}
}

// svgFrame is one drawn frame as read back from the SVG.
type svgFrame struct {
	title, label string
	x, y, width  float64
	s, n, d      int64
}

var titleRE = regexp.MustCompile(`^([\s\S]*) \(([^()]*), ([\d.]+)%(?:, was [\d.]+%)?\)$`)

// parseFlameGraph parses the SVG as XML and returns its frames by name, the
// root element and the script's text.
func parseFlameGraph(t *testing.T, data []byte) (map[string]svgFrame, *xnode, string) {
	t.Helper()
	var root xnode
	if err := xml.Unmarshal(data, &root); err != nil {
		t.Fatalf("not valid XML: %v", err)
	}
	if root.XMLName.Local != "svg" {
		t.Fatalf("root element %v", root.XMLName)
	}
	frames := map[string]svgFrame{}
	script := ""
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("number %q: %v", s, err)
		}
		return v
	}
	root.walk(func(n *xnode) {
		if n.XMLName.Local == "script" {
			script += n.Text
		}
		if n.XMLName.Local != "g" || n.attr("class") != "f" {
			return
		}
		title, rect, text := n.child("title"), n.child("rect"), n.child("text")
		if title == nil || rect == nil || text == nil {
			t.Fatalf("frame group without title/rect/text: %+v", n)
		}
		m := titleRE.FindStringSubmatch(title.Text)
		if m == nil {
			t.Fatalf("title %q is not \"name (AMOUNT, P%%)\"", title.Text)
		}
		f := svgFrame{title: title.Text, label: text.Text,
			x: num(rect.attr("x")), y: num(rect.attr("y")), width: num(rect.attr("width")),
			s: int64(num(n.attr("data-s"))), n: int64(num(n.attr("data-n"))), d: int64(num(n.attr("data-d")))}
		if m[2] != n.attr("data-a") {
			t.Fatalf("title %q disagrees with data-a %q", title.Text, n.attr("data-a"))
		}
		if _, dup := frames[m[1]]; dup {
			t.Fatalf("frame %q drawn twice", m[1])
		}
		frames[m[1]] = f
	})
	return frames, &root, script
}

func writeFlameGraph(t *testing.T, p *profile.Profile, opt FlameGraphOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFlameGraph(&buf, p, opt); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFlameGraphKnownSplit(t *testing.T) {
	data := writeFlameGraph(t, knownSplit(), FlameGraphOptions{Title: "known split"})
	frames, root, script := parseFlameGraph(t, data)
	if root.attr("width") != "1200" {
		t.Fatalf("default width %q, want 1200", root.attr("width"))
	}
	for _, name := range []string{"all", "main", "a", "hot", "b", "cold"} {
		if _, ok := frames[name]; !ok {
			t.Fatalf("frame %q missing; have %v", name, frames)
		}
	}
	if len(frames) != 6 {
		t.Fatalf("%d frames, want 6", len(frames))
	}
	all, main, a, hot, b, cold := frames["all"], frames["main"], frames["a"], frames["hot"], frames["b"], frames["cold"]
	// Widths are proportional to samples, up to the 2-decimal rounding.
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 0.02 {
			t.Errorf("%s = %.3f, want %.3f", what, got, want)
		}
	}
	near("all width", all.width, 1200-2*fgPadX)
	near("main width", main.width, all.width)
	near("hot width", hot.width, 3*cold.width)
	near("hot width", hot.width, 0.75*all.width)
	near("a width", a.width, hot.width)
	near("b width", b.width, cold.width)
	// Callees start at their caller's left edge; siblings do not overlap.
	near("a x", a.x, main.x)
	near("hot x", hot.x, a.x)
	// main has no self samples, so its callees tile it exactly.
	near("b x", b.x, a.x+a.width)
	near("cold x", cold.x, b.x)
	// The root is at the bottom: y grows downwards in SVG.
	if !(all.y > main.y && main.y > a.y && a.y > hot.y && a.y == b.y && hot.y == cold.y) {
		t.Errorf("depths not stacked upwards: all %v main %v a %v b %v hot %v cold %v", all.y, main.y, a.y, b.y, hot.y, cold.y)
	}
	// knownSplit samples every 10 ms: 300 samples weigh 3 s of CPU.
	if hot.title != "hot (3.00 s CPU, 75.00%)" || cold.title != "cold (1.00 s CPU, 25.00%)" {
		t.Errorf("titles %q, %q", hot.title, cold.title)
	}
	if main.label != "main" {
		t.Errorf("main labelled %q", main.label)
	}
	if !strings.Contains(script, "function zoom(") || !strings.Contains(script, "function search(") {
		t.Errorf("script element missing or without zoom/search: %d bytes", len(script))
	}
	var title string
	root.walk(func(n *xnode) {
		if n.attr("id") == "title" {
			title = n.Text
		}
	})
	if title != "known split" {
		t.Errorf("title %q", title)
	}
	// Nothing is loaded from elsewhere.
	for _, bad := range []string{"href=", "src=", "@import"} {
		if bytes.Contains(data, []byte(bad)) {
			t.Errorf("SVG refers to an external resource (%s)", bad)
		}
	}
}

func TestFlameGraphOrderAndWidth(t *testing.T) {
	// zeta is wider than alpha: alphabetical puts alpha first, by-total zeta.
	var specs []stackSpec
	for i := 0; i < 30; i++ {
		specs = append(specs, stackSpec{1, "main;zeta"})
	}
	for i := 0; i < 10; i++ {
		specs = append(specs, stackSpec{1, "main;alpha"})
	}
	p := profileOf(specs...)
	frames, root, _ := parseFlameGraph(t, writeFlameGraph(t, p, FlameGraphOptions{Width: 600}))
	if root.attr("width") != "600" || math.Abs(frames["all"].width-(600-2*fgPadX)) > 0.02 {
		t.Fatalf("width 600 gave svg width %q, root frame %v", root.attr("width"), frames["all"].width)
	}
	if !(frames["alpha"].x < frames["zeta"].x) {
		t.Errorf("alphabetical order: alpha at %v, zeta at %v", frames["alpha"].x, frames["zeta"].x)
	}
	frames, _, _ = parseFlameGraph(t, writeFlameGraph(t, p, FlameGraphOptions{SortByTotal: true}))
	if !(frames["zeta"].x < frames["alpha"].x) {
		t.Errorf("by total: zeta at %v, alpha at %v", frames["zeta"].x, frames["alpha"].x)
	}
}

func TestFlameGraphOmitsSlivers(t *testing.T) {
	var specs []stackSpec
	for i := 0; i < 2000; i++ {
		specs = append(specs, stackSpec{1, "main;big"})
	}
	specs = append(specs, stackSpec{1, "main;tiny;tinier"}, stackSpec{2, "main;small"}, stackSpec{2, "main;small"}, stackSpec{2, "main;small"})
	frames, _, _ := parseFlameGraph(t, writeFlameGraph(t, profileOf(specs...), FlameGraphOptions{}))
	if _, ok := frames["tiny"]; ok {
		t.Errorf("tiny (1 of 2004 samples) drawn")
	}
	if _, ok := frames["tinier"]; ok {
		t.Errorf("tinier drawn without its caller")
	}
	if _, ok := frames["small"]; !ok {
		t.Errorf("small (3 of 2004 samples, above 0.1%%) omitted")
	}
	if frames["main"].n != 2004 {
		t.Errorf("main lost the omitted samples: %d", frames["main"].n)
	}
}

func TestFlameGraphEscapesNames(t *testing.T) {
	names := []string{
		`std::operator<< <char, std::char_traits<char> >(std::ostream&, char const*)`,
		`say "hi" & 'bye' ]]> <!-- -->`,
	}
	p := profileOf(stackSpec{1, "main;" + names[0]}, stackSpec{1, "main;" + names[1]})
	// A name that is not UTF-8 or holds a control character must not make
	// the file invalid either.
	p.Add(profile.Sample{TID: 1, Time: p.Start.Add(time.Second), Frames: []profile.Frame{{Function: "bad\xff\x01\x00name"}}})
	frames, _, _ := parseFlameGraph(t, writeFlameGraph(t, p, FlameGraphOptions{Title: `<title> & "quotes"`}))
	for _, n := range names {
		if _, ok := frames[n]; !ok {
			t.Errorf("name %q did not read back; frames %v", n, frames)
		}
	}
	if _, ok := frames["bad\uFFFD\uFFFD\uFFFDname"]; !ok {
		t.Errorf("invalid name not replaced; frames %v", frames)
	}
}

func TestFlameGraphEmpty(t *testing.T) {
	frames, _, script := parseFlameGraph(t, writeFlameGraph(t, profile.New(1, "", time.Now(), time.Millisecond), FlameGraphOptions{}))
	if len(frames) != 0 || script == "" {
		t.Fatalf("empty profile: %d frames, script %d bytes", len(frames), len(script))
	}
}

// FuzzFlameGraphName checks any symbol name, which comes from untrusted
// ELF files, gives valid XML in which the name reads back.
func FuzzFlameGraphName(f *testing.F) {
	fuzzbudget.Limit(f)
	for _, s := range []string{"main", "a<b>&c\"d'", "]]>", "\x00\xff", "\r\n\t", "x (3 samples, 1%)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return // Frame.Name falls back to the address
		}
		p := profileOf()
		p.Add(profile.Sample{TID: 1, Time: p.Start, Frames: []profile.Frame{{Function: name}}})
		var buf bytes.Buffer
		if err := WriteFlameGraph(&buf, p, FlameGraphOptions{Title: name}); err != nil {
			t.Fatal(err)
		}
		frames, _, _ := parseFlameGraph(t, buf.Bytes())
		if len(frames) != 2 {
			t.Fatalf("%d frames for one stack of one frame", len(frames))
		}
		if utf8.ValidString(name) && !strings.ContainsFunc(name, notXMLChar) {
			if _, ok := frames[name]; !ok {
				t.Fatalf("name %q did not read back: %v", name, frames)
			}
		}
	})
}

// notXMLChar reports runes XML 1.0 does not allow in a document.
func notXMLChar(r rune) bool {
	return !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF)
}

// fakeDOM is a minimal DOM for running the flame graph's script under node:
// elements with attributes, classes, text and listeners, built from the
// parsed SVG. It is just enough for the script, which is the point: the
// script uses nothing else.
const fakeDOM = `
function El(tag, attrs, text) {
	this.tag = tag; this.attrs = attrs; this.textContent = text; this.kids = []; this.on = {};
	var cls = (attrs["class"] || "").split(/\s+/).filter(Boolean), self = this;
	this.classList = {
		add: function (c) { if (cls.indexOf(c) < 0) cls.push(c); },
		remove: function (c) { cls = cls.filter(function (x) { return x !== c; }); },
		toggle: function (c, on) { if (on) this.add(c); else this.remove(c); },
		contains: function (c) { return cls.indexOf(c) >= 0; },
	};
}
El.prototype.getAttribute = function (n) { return this.attrs[n]; };
El.prototype.setAttribute = function (n, v) { this.attrs[n] = String(v); };
El.prototype.addEventListener = function (ev, fn) { this.on[ev] = fn; };
El.prototype.getElementsByTagName = function (tag) {
	var out = [];
	(function walk(e) { e.kids.forEach(function (k) { if (k.tag === tag) out.push(k); walk(k); }); })(this);
	return out;
};
function build(n) { var e = new El(n.tag, n.attrs, n.text); e.kids = n.kids.map(build); return e; }
var svg = build(JSON.parse(require("fs").readFileSync(process.argv[2], "utf8")));
var byId = {};
(function index(e) { if (e.attrs.id) byId[e.attrs.id] = e; e.kids.forEach(index); })(svg);
var document = { getElementById: function (id) { return byId[id] || null; } };
var window = { on: {}, addEventListener: function (ev, fn) { this.on[ev] = fn; } };
var answer = null;
function prompt() { return answer; }
`

// fakeDOMTest drives the script like a user and prints what it drew.
const fakeDOMTest = `
window.on.load();
function frame(name) { return frames.filter(function (f) { return f.name === name; })[0]; }
function state(name) {
	var f = frame(name);
	return {hidden: f.g.classList.contains("hide"), parent: f.g.classList.contains("parent"),
		x: parseFloat(f.rect.attrs.x), width: parseFloat(f.rect.attrs.width), label: f.text.textContent,
		fill: f.rect.attrs.fill};
}
var out = {};
answer = "^hot$"; byId.search.on.click();
out.searchHot = byId.matched.textContent; out.hotFill = state("hot").fill; out.coldFill = state("cold").fill;
byId.search.on.click(); // resets
out.searchReset = byId.matched.textContent; out.hotFillAfter = state("hot").fill;
answer = "^(a|hot)$"; byId.search.on.click(); out.searchNested = byId.matched.textContent; byId.search.on.click();
answer = "o"; byId.search.on.click(); out.searchSubstring = byId.matched.textContent; byId.search.on.click();
answer = "(("; byId.search.on.click(); out.searchBadRegexp = byId.matched.textContent; byId.search.on.click();
frame("b").g.on.click();
out.zoomB = {b: state("b"), cold: state("cold"), main: state("main"), hot: state("hot"), a: state("a"),
	unzoomHidden: byId.unzoom.classList.contains("hide")};
byId.unzoom.on.click();
out.unzoom = {hot: state("hot"), main: state("main"), unzoomHidden: byId.unzoom.classList.contains("hide")};
console.log(JSON.stringify(out));
`

type jsNode struct {
	Tag   string            `json:"tag"`
	Attrs map[string]string `json:"attrs"`
	Text  string            `json:"text"`
	Kids  []jsNode          `json:"kids"`
}

func toJS(n *xnode) jsNode {
	j := jsNode{Tag: n.XMLName.Local, Attrs: map[string]string{}, Text: n.Text, Kids: []jsNode{}}
	for _, a := range n.Attrs {
		j.Attrs[a.Name.Local] = a.Value
	}
	for i := range n.Children {
		j.Kids = append(j.Kids, toJS(&n.Children[i]))
	}
	return j
}

// TestFlameGraphScript runs the embedded script under node against a
// minimal DOM and checks search and zoom do what the buttons say.
func TestFlameGraphScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not in PATH")
	}
	_, root, script := parseFlameGraph(t, writeFlameGraph(t, knownSplit(), FlameGraphOptions{}))
	dir := t.TempDir()
	tree, _ := json.Marshal(toJS(root))
	os.WriteFile(filepath.Join(dir, "svg.json"), tree, 0o644)
	js := filepath.Join(dir, "run.js")
	os.WriteFile(js, []byte(fakeDOM+script+fakeDOMTest), 0o644)
	cmd := exec.Command(node, js, filepath.Join(dir, "svg.json"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	type st struct {
		Hidden, Parent bool
		X, Width       float64
		Label, Fill    string
	}
	var got struct {
		SearchHot, SearchReset, SearchNested, SearchSubstring, SearchBadRegexp string
		HotFill, ColdFill, HotFillAfter                                        string
		ZoomB                                                                  struct {
			B, Cold, Main, Hot, A st
			UnzoomHidden          bool
		}
		Unzoom struct {
			Hot, Main    st
			UnzoomHidden bool
		}
	}
	if err := json.NewDecoder(io.LimitReader(bytes.NewReader(out), 1<<20)).Decode(&got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	check := func(what string, ok bool) {
		if !ok {
			t.Errorf("%s: %+v", what, got)
		}
	}
	plot := float64(1200 - 2*fgPadX)
	check("search ^hot$ matches 75%", got.SearchHot == "Matched: 75.0%")
	check("search highlights hot only", got.HotFill != got.ColdFill && got.HotFill == "rgb(230,0,230)")
	check("reset clears", got.SearchReset == " " && got.HotFillAfter != "rgb(230,0,230)")
	check("nested matches counted once", got.SearchNested == "Matched: 75.0%")
	check("substring o matches hot and cold", got.SearchSubstring == "Matched: 100.0%")
	check("invalid regexp searched as text", got.SearchBadRegexp == "Matched: 0.0%")
	z := got.ZoomB
	check("zoomed frame full width, not faded", math.Abs(z.B.Width-plot) < 0.01 && math.Abs(z.B.X-fgPadX) < 0.01 && !z.B.Hidden && !z.B.Parent)
	check("callee of zoomed frame full width", math.Abs(z.Cold.Width-plot) < 0.01 && !z.Cold.Hidden)
	check("ancestor kept, faded", !z.Main.Hidden && z.Main.Parent && math.Abs(z.Main.Width-plot) < 0.01)
	check("siblings hidden", z.Hot.Hidden && z.A.Hidden)
	check("reset zoom shown", !z.UnzoomHidden)
	u := got.Unzoom
	check("unzoom restores", !u.Hot.Hidden && math.Abs(u.Hot.Width-0.75*plot) < 0.01 && !u.Main.Parent && u.UnzoomHidden)
}

// TestDiffFlameGraph: against a base where hot had 75% and cold 25%, a
// profile where each has 50% draws hot blue (it shrank) and cold red (it
// grew), each frame's colour following the sign of its change, and says
// the change in the tooltip.
func TestDiffFlameGraph(t *testing.T) {
	start := time.Unix(1700000000, 0)
	now := profile.New(42, "fixture", start, 10*time.Millisecond)
	mod := profile.Frame{Module: "/usr/bin/fixture", MapStart: 0x400000, MapLimit: 0x500000}
	fr := func(pc uint64, name string) profile.Frame {
		f := mod
		f.PC, f.Function = pc, name
		return f
	}
	hot := []profile.Frame{fr(0x401010, "hot"), fr(0x401010, "a"), fr(0x401100, "main")}
	cold := []profile.Frame{fr(0x402010, "cold"), fr(0x402100, "b"), fr(0x401108, "main")}
	hot[0].Inlined = true
	for i := 0; i < 200; i++ {
		frames := hot
		if i%2 == 0 {
			frames = cold
		}
		now.Add(profile.Sample{TID: 1, Time: start, Frames: frames})
	}
	var buf bytes.Buffer
	if err := WriteFlameGraph(&buf, now, FlameGraphOptions{Base: knownSplit()}); err != nil {
		t.Fatal(err)
	}
	frames, _, _ := parseFlameGraph(t, buf.Bytes())
	var root xnode
	xml.Unmarshal(buf.Bytes(), &root)
	fills := map[string]string{}
	root.walk(func(n *xnode) {
		if n.XMLName.Local == "g" && n.attr("class") == "f" {
			m := titleRE.FindStringSubmatch(n.child("title").Text)
			fills[m[1]] = n.child("rect").attr("fill")
		}
	})
	sign := func(fill string) int {
		var r, g, b int
		if _, err := fmt.Sscanf(fill, "rgb(%d,%d,%d)", &r, &g, &b); err != nil {
			t.Fatalf("fill %q: %v", fill, err)
		}
		switch {
		case r == 255 && g == b && b < 255:
			return 1
		case b == 255 && r == g && r < 255:
			return -1
		}
		return 0
	}
	for name, want := range map[string]int{"hot": -1, "a": -1, "cold": 1, "b": 1, "main": 0} {
		if got := sign(fills[name]); got != want {
			t.Errorf("%s drawn %s (sign %d), want sign %d", name, fills[name], got, want)
		}
	}
	if frames["hot"].title != "hot (1.00 s CPU, 50.00%, was 75.00%)" || frames["cold"].title != "cold (1.00 s CPU, 50.00%, was 25.00%)" {
		t.Errorf("titles %q, %q do not give the change", frames["hot"].title, frames["cold"].title)
	}
}
