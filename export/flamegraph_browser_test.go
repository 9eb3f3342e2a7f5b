package export

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// findChromium returns a Chromium (or Chrome) binary, or "" when none is
// installed.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserFrame is a drawn frame as the browser lays it out.
type browserFrame struct {
	X, Y, Width, Height float64 // bounding box on the page, in CSS pixels
	RectWidth           float64 // the rect's width attribute
	Fill                string
	Hidden              bool
}

// TestFlameGraphInChromium opens a generated SVG as a standalone file in
// headless Chromium and uses it as a person would: hover a frame, click a
// narrow one, reset, search with Ctrl-F and with the Search button.
func TestFlameGraphInChromium(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium installed (scripts/install-test-deps.sh installs Debian's chromium): the flame graph's script is not tested in a browser")
	}
	if testing.Short() {
		t.Skip("-short: not starting a browser")
	}
	// main;wide 96%, main;narrow;leaf 4%: narrow is 4% of the plot wide.
	var specs []stackSpec
	for i := 0; i < 96; i++ {
		specs = append(specs, stackSpec{1, "main;wide"})
	}
	for i := 0; i < 4; i++ {
		specs = append(specs, stackSpec{1, "main;narrow;leaf"})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "flame.svg")
	if err := os.WriteFile(path, writeFlameGraph(t, profileOf(specs...), FlameGraphOptions{}), 0o644); err != nil {
		t.Fatal(err)
	}
	plot := float64(fgDefaultWidth - 2*fgPadX)

	// The machine may have no network: nothing in the browser may try it.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1300, 800),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// The page waits while a search prompt is open, and so does the action
	// that opened it: another goroutine answers each prompt with the next
	// of answers.
	answers := make(chan string, 4)
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			text := ""
			select {
			case text = <-answers:
			default:
			}
			chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true, PromptText: text})
		}
	}()

	u := url.URL{Scheme: "file", Path: path}
	if err := chromedp.Do(bctx, chromedp.Navigate(u.String())); err != nil {
		t.Fatalf("opening %s in %s: %v", u.String(), bin, err)
	}
	nframes, err := chromedp.Run(bctx, chromedp.Evaluate[int](`frames.length`))
	if err != nil {
		t.Fatalf("the flame graph's script did not run: %v", err)
	}
	// all, main, wide, narrow, leaf.
	if nframes != 5 {
		t.Fatalf("the script found %d frames on load, want 5", nframes)
	}

	frame := func(name string) browserFrame {
		t.Helper()
		js := fmt.Sprintf(`(function () {
			var f = frames.filter(function (f) { return f.name === %q; })[0];
			var b = f.rect.getBoundingClientRect();
			return {X: b.x, Y: b.y, Width: b.width, Height: b.height,
				RectWidth: parseFloat(f.rect.getAttribute("width")),
				Fill: f.rect.getAttribute("fill"), Hidden: f.g.classList.contains("hide")};
		})()`, name)
		f, err := chromedp.Run(bctx, chromedp.Evaluate[browserFrame](js))
		if err != nil {
			t.Fatalf("reading frame %s: %v", name, err)
		}
		return f
	}
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`document.getElementById(%q).textContent`, id)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	click := func(f browserFrame) {
		t.Helper()
		x, y := f.X+f.Width/2, f.Y+f.Height/2
		if err := chromedp.Do(bctx, chromedp.MouseEvent(chromedp.MouseMoved, x, y), chromedp.MouseClickXY(x, y)); err != nil {
			t.Fatal(err)
		}
	}

	// Hover: the details line names the frame, its module, samples and share.
	narrow := frame("narrow")
	if math.Abs(narrow.RectWidth-0.04*plot) > 0.01 {
		t.Fatalf("narrow frame %.2f px wide, want %.2f", narrow.RectWidth, 0.04*plot)
	}
	if err := chromedp.Do(bctx, chromedp.MouseEvent(chromedp.MouseMoved, narrow.X+narrow.Width/2, narrow.Y+narrow.Height/2)); err != nil {
		t.Fatal(err)
	}
	if got, want := text("details"), "narrow in spec (40.0 ms CPU, 4.00%)"; got != want {
		t.Errorf("hovering narrow shows %q, want %q", got, want)
	}

	// Zoom: a click widens the narrow frame to the plot's width, hides its
	// sibling and shows Reset Zoom; the reset restores the widths.
	click(narrow)
	if z := frame("narrow"); math.Abs(z.RectWidth-plot) > 0.01 || math.Abs(z.Width-plot) > 1 {
		t.Errorf("after clicking narrow it is %.2f px wide (%.2f on screen), want the plot's %.0f", z.RectWidth, z.Width, plot)
	}
	if leaf := frame("leaf"); math.Abs(leaf.RectWidth-plot) > 0.01 {
		t.Errorf("narrow's callee leaf is %.2f px wide when zoomed, want %.0f", leaf.RectWidth, plot)
	}
	if !frame("wide").Hidden {
		t.Errorf("narrow's sibling wide is still shown when zoomed")
	}
	if unzoom, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`!document.getElementById("unzoom").classList.contains("hide")`)); err != nil || !unzoom {
		t.Fatalf("Reset Zoom not shown after a zoom (%v)", err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("unzoom"))); err != nil {
		t.Fatal(err)
	}
	if w := frame("wide"); w.Hidden || math.Abs(w.RectWidth-0.96*plot) > 0.01 {
		t.Errorf("after Reset Zoom wide is %+v, want shown and %.2f px wide", w, 0.96*plot)
	}

	// Search with Ctrl-F: matches are highlighted, the matched share shown.
	answers <- "^(narrow|leaf)$"
	if err := chromedp.Do(bctx, chromedp.KeyEvent("f", chromedp.KeyModifiers(chromedp.ModifierCtrl))); err != nil {
		t.Fatal(err)
	}
	waitText := func(id, want string) string {
		t.Helper()
		var got string
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if got = text(id); got == want {
				break
			}
		}
		return got
	}
	if got := waitText("matched", "Matched: 4.0%"); got != "Matched: 4.0%" {
		t.Errorf("after Ctrl-F ^(narrow|leaf)$ the matched line is %q, want Matched: 4.0%% (nested matches counted once)", got)
	}
	if n, l, w := frame("narrow"), frame("leaf"), frame("wide"); n.Fill != fgMatchFill || l.Fill != fgMatchFill || w.Fill == fgMatchFill {
		t.Errorf("highlight after search: narrow %s, leaf %s, wide %s; want the first two %s", n.Fill, l.Fill, w.Fill, fgMatchFill)
	}
	// The Search button now resets; a second click asks again.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("search"))); err != nil {
		t.Fatal(err)
	}
	if got := waitText("matched", " "); strings.TrimSpace(got) != "" || frame("narrow").Fill == fgMatchFill {
		t.Errorf("Reset Search left %q and narrow %s", got, frame("narrow").Fill)
	}
	answers <- "wid"
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("search"))); err != nil {
		t.Fatal(err)
	}
	if got := waitText("matched", "Matched: 96.0%"); got != "Matched: 96.0%" {
		t.Errorf("after the Search button with wid the matched line is %q, want Matched: 96.0%%", got)
	}
	if frame("wide").Fill != fgMatchFill {
		t.Errorf("wide not highlighted after searching wid")
	}
}
