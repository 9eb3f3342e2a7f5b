package otlp_test

import (
	"context"
	"testing"
	"time"

	profpb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"

	"codeberg.org/stacktop/stacktop/export/otlp"
	"codeberg.org/stacktop/stacktop/internal/testsupport/otelcol"
	"codeberg.org/stacktop/stacktop/profile"
)

// sampleProfile is a small profile: two threads, three stacks, inlined
// frames, a mapping with a build ID.
func sampleProfile() *profile.Profile {
	start := time.Unix(1_700_000_000, 0)
	p := profile.New(42, "split 10", start, 10*time.Millisecond)
	m := profile.Frame{Module: "/usr/bin/split", BuildID: "abcdef0123456789", MapStart: 0x400000, MapLimit: 0x500000}
	fr := func(pc uint64, fn, file string, line int, inlined bool) profile.Frame {
		f := m
		f.PC, f.Function, f.File, f.Line, f.Inlined = pc, fn, file, line, inlined
		return f
	}
	hot := []profile.Frame{fr(0x401010, "spin_until", "split.c", 40, true), fr(0x401010, "hot", "split.c", 44, false), fr(0x401100, "a", "split.c", 46, false), fr(0x401200, "main", "split.c", 60, false)}
	cold := []profile.Frame{fr(0x401030, "cold", "split.c", 45, false), fr(0x401140, "b", "split.c", 47, false), fr(0x401200, "main", "split.c", 61, false)}
	other := []profile.Frame{{PC: 0x7fff0000}} // no module
	for i := 0; i < 30; i++ {
		at := start.Add(time.Duration(i) * 10 * time.Millisecond)
		p.Add(profile.Sample{TID: 42, ThreadName: "split", Time: at, Frames: hot})
		if i%3 == 0 {
			p.Add(profile.Sample{TID: 42, ThreadName: "split", Time: at, Frames: cold})
		}
		if i%10 == 0 {
			p.Add(profile.Sample{TID: 43, ThreadName: "helper", Time: at, Frames: other})
		}
	}
	return p
}

func TestCollectorReceives(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an OpenTelemetry Collector")
	}
	col := otelcol.StartT(t, 0, 0)
	p := sampleProfile()
	res := otlp.Resource{HostName: "h1", PID: 42, ExecutablePath: "/usr/bin/split", CommandArgs: []string{"split", "10"}, Extra: map[string]string{"deployment.environment.name": "test"}}
	req := otlp.Build(p, res)
	want := otelcol.Folded([]*profpb.ProfilesData{{ResourceProfiles: req.ResourceProfiles, Dictionary: req.Dictionary}})
	if want["42;main;a;hot;spin_until"] != 30 || want["42;main;b;cold"] != 10 {
		t.Fatalf("local request: %v", want)
	}
	sent := 0
	for _, tc := range []struct{ protocol, endpoint string }{
		{otlp.ProtocolGRPC, col.GRPC},
		{otlp.ProtocolHTTP, "http://" + col.HTTP},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			cfg, ok, err := otlp.ConfigFromEnv(tc.endpoint, tc.protocol, func(string) string { return "" })
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			c, err := otlp.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Export(context.Background(), otlp.Build(p, res)); err != nil {
				t.Fatalf("%v\n%s", err, col.Logs())
			}
			sent++
			got, err := col.WaitFor(10*time.Second, func(got []*profpb.ProfilesData) bool { return len(got) >= sent })
			if err != nil {
				t.Fatalf("%v\n%s", err, col.Logs())
			}
			last := got[len(got)-1]
			if f := otelcol.Folded(got[len(got)-1:]); !equalCounts(f, want) {
				t.Errorf("received %v, sent %v", f, want)
			}
			attrs := otelcol.ResourceAttributes(last)[0]
			for _, k := range []string{otlp.AttrHostName, otlp.AttrPID, otlp.AttrExecutablePath, otlp.AttrCommand, otlp.AttrServiceName, "deployment.environment.name"} {
				if attrs[k] == "" {
					t.Errorf("resource attribute %s missing: %v", k, attrs)
				}
			}
			if attrs[otlp.AttrPID] != "42" || attrs[otlp.AttrCommandArgs] != "[split 10]" {
				t.Errorf("resource attributes %v", attrs)
			}
			if ids := otelcol.MappingBuildIDs(last); len(ids) != 1 || ids["/usr/bin/split"] != "abcdef0123456789" {
				t.Errorf("mapping build IDs %v", ids)
			}
		})
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
