package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/export/fleet"
	"codeberg.org/stacktop/stacktop/export/otlp"
	"codeberg.org/stacktop/stacktop/procmaps"
)

// fleetFlags are record's continuous-upload flags (docs/fleet.md).
type fleetFlags struct {
	otlp         string
	otlpSet      bool
	otlpProtocol string
	pyroscope    string
	pyroAuth     fleet.PyroscopeAuth
	appName      string
	tags         map[string]string
	interval     time.Duration

	otlpCfg otlp.Config // resolved by check
	useOTLP bool
}

func (f *fleetFlags) addTo(fs *pflag.FlagSet) {
	fs.Var(funcValue{"endpoint", func(s string) error {
		f.otlp, f.otlpSet = s, true
		return nil
	}}, "otlp", "send a profile every --upload-interval to this OTLP endpoint (host:port or URL; \"\" takes OTEL_EXPORTER_OTLP_[PROFILES_]ENDPOINT)")
	fs.StringVar(&f.otlpProtocol, "otlp-protocol", "", "grpc or http/protobuf (default: OTEL_EXPORTER_OTLP_[PROFILES_]PROTOCOL, else grpc)")
	fs.StringVar(&f.pyroscope, "pyroscope", "", "send a profile every --upload-interval to this Pyroscope server's /ingest (e.g. http://pyroscope:4040)")
	fs.StringVar(&f.pyroAuth.TenantID, "pyroscope-tenant", "", "Pyroscope tenant (X-Scope-OrgID) (default: $PYROSCOPE_TENANT_ID)")
	fs.StringVar(&f.pyroAuth.BasicAuthUser, "pyroscope-user", "", "Pyroscope basic-auth user (default: $PYROSCOPE_BASIC_AUTH_USER)")
	fs.StringVar(&f.pyroAuth.BasicAuthPassword, "pyroscope-password", "", "Pyroscope basic-auth password (default: $PYROSCOPE_BASIC_AUTH_PASSWORD, better: a flag's value is visible to every user in ps)")
	fs.StringVar(&f.pyroAuth.BearerToken, "pyroscope-token", "", "Pyroscope bearer token (default: $PYROSCOPE_AUTH_TOKEN, better: a flag's value is visible to every user in ps)")
	fs.StringVar(&f.appName, "app-name", "", "Pyroscope application name (default: the executable's name)")
	f.tags = map[string]string{}
	fs.Var(funcValue{"name=value", func(s string) error {
		k, v, err := fleet.ParseTag(s)
		if err == nil {
			f.tags[k] = v
		}
		return err
	}}, "tag", "Pyroscope label NAME=VALUE (repeatable)")
	fs.DurationVar(&f.interval, "upload-interval", fleet.DefaultInterval, "how often --otlp and --pyroscope send what was sampled since the last upload")
	setGroup(fs, groupUpload, "otlp", "otlp-protocol", "pyroscope", "pyroscope-tenant", "pyroscope-user",
		"pyroscope-password", "pyroscope-token", "app-name", "tag", "upload-interval")
}

// check resolves the OTLP configuration from the flags and the
// environment: --otlp, or OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT alone,
// turns OTLP uploads on.
func (f *fleetFlags) check() error {
	if f.interval < time.Second {
		return fmt.Errorf("--upload-interval must be at least 1s")
	}
	if f.otlpSet || os.Getenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT") != "" {
		cfg, ok, err := otlp.ConfigFromEnv(f.otlp, f.otlpProtocol, os.Getenv)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("--otlp: no endpoint (give one, or set OTEL_EXPORTER_OTLP_ENDPOINT)")
		}
		f.otlpCfg, f.useOTLP = cfg, true
	}
	if f.pyroscope != "" && !strings.HasPrefix(f.pyroscope, "http://") && !strings.HasPrefix(f.pyroscope, "https://") {
		return fmt.Errorf("--pyroscope wants an http:// or https:// URL, got %q", f.pyroscope)
	}
	if f.pyroscope != "" {
		if err := otlp.CheckEndpoint(f.pyroscope); err != nil {
			return fmt.Errorf("--pyroscope: %v", err)
		}
	}
	if f.pyroscope == "" {
		return nil // the PYROSCOPE_* variables are another tool's then
	}
	return f.pyroscopeAuth(os.Getenv)
}

// pyroscopeAuth completes the Pyroscope credentials from the environment,
// under the names Pyroscope's agents read, where no flag gave them. (The
// environment is the better place for secrets: a flag's value is in
// /proc/PID/cmdline for every user to read.) Messages never show a
// password or token.
func (f *fleetFlags) pyroscopeAuth(getenv func(string) string) error {
	a := &f.pyroAuth
	for _, v := range []struct {
		value *string
		env   string
	}{
		{&a.TenantID, "PYROSCOPE_TENANT_ID"},
		{&a.BasicAuthUser, "PYROSCOPE_BASIC_AUTH_USER"},
		{&a.BasicAuthPassword, "PYROSCOPE_BASIC_AUTH_PASSWORD"},
		{&a.BearerToken, "PYROSCOPE_AUTH_TOKEN"},
	} {
		if *v.value == "" {
			*v.value = getenv(v.env)
		}
	}
	switch {
	case a.BasicAuthUser != "" && a.BearerToken != "":
		return fmt.Errorf("--pyroscope: basic auth (user %q) and a bearer token: give one", a.BasicAuthUser)
	case a.BasicAuthUser != "" && a.BasicAuthPassword == "":
		return fmt.Errorf("--pyroscope-user %q: no password (set PYROSCOPE_BASIC_AUTH_PASSWORD)", a.BasicAuthUser)
	case a.BasicAuthUser == "" && a.BasicAuthPassword != "":
		return fmt.Errorf("a Pyroscope password without a user: give --pyroscope-user or PYROSCOPE_BASIC_AUTH_USER")
	}
	return nil
}

func (f *fleetFlags) uploading() bool { return f.useOTLP || f.pyroscope != "" }

// start makes the uploader of a recording of pid (started from cmdArgs
// with -- CMD); nil when not uploading.
func (f *fleetFlags) start(src fleet.Source, pid int, cmdArgs []string, rate float64, log io.Writer) (*fleet.Uploader, error) {
	if !f.uploading() {
		return nil, nil
	}
	var sinks []fleet.Sink
	if f.useOTLP {
		c, err := otlp.NewClient(f.otlpCfg)
		if err != nil {
			return nil, err
		}
		extra, err := otlp.ParseKeyValues(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		host, _ := os.Hostname()
		// Read at each upload (with -- CMD the process execs after the
		// first look); the last window comes after the process exited, so
		// what was last seen is kept.
		var last otlp.Resource
		sinks = append(sinks, &fleet.OTLPSink{Client: c, Resource: func() otlp.Resource {
			if exe := procmaps.Executable(pid); exe != "" {
				last.ExecutablePath, last.CommandArgs = exe, procmaps.Args(pid)
			}
			return otlp.Resource{
				HostName: host, ServiceName: os.Getenv("OTEL_SERVICE_NAME"), PID: pid,
				ExecutablePath: last.ExecutablePath, CommandArgs: last.CommandArgs, Extra: extra,
			}
		}})
	}
	if f.pyroscope != "" {
		app := f.appName
		switch {
		case app != "":
		case len(cmdArgs) > 0: // the process is still the shell that execs CMD
			app = filepath.Base(cmdArgs[0])
		default:
			app = filepath.Base(procmaps.Executable(pid))
		}
		sinks = append(sinks, &fleet.PyroscopeSink{URL: f.pyroscope, AppName: app, Tags: f.tags, Rate: rate, Auth: f.pyroAuth})
	}
	return fleet.New(src, sinks, fleet.Options{Interval: f.interval, Log: log}), nil
}

// writeUploadSummary adds the uploads to record's summary.
func writeUploadSummary(w io.Writer, st fleet.Stats) {
	for _, s := range st.Sinks {
		fmt.Fprintf(w, "  uploads to %s: %d of %d windows sent (%d samples), %d dropped, %d retries\n",
			s.Name, s.Sent, st.Windows, s.Samples, s.Dropped, s.Retries)
		if s.LastErr != nil && s.Down {
			fmt.Fprintf(w, "  last upload error: %v\n", s.LastErr)
		}
	}
}
