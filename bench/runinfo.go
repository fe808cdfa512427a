package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/goarmci/goarmci/internal/config"
)

// RunInfo says what produced a result: the goarmci build and the machine. Every Result and
// Table written by goarmci bench carries one; text and CSV print it as "# Version:" and
// "# Machine:" header lines, JSON as the "run" object.
type RunInfo struct {
	Version   string `json:"version"`          // goarmci's module version and VCS revision
	GoVersion string `json:"go_version"`       // the Go release that built the benchmark
	Host      string `json:"host"`             // host name
	Platform  string `json:"platform"`         // GOOS/GOARCH
	CPUs      int    `json:"cpus"`             // logical CPUs usable by the process
	CPU       string `json:"cpu,omitempty"`    // CPU model (from /proc/cpuinfo)
	Kernel    string `json:"kernel,omitempty"` // kernel release
}

// CurrentRun describes this process's build and machine.
func CurrentRun() *RunInfo {
	b := config.BuildInfo()
	v := b.Version
	if b.Revision != "" {
		v += " revision " + b.Revision
		if b.Modified {
			v += " (modified)"
		}
	}
	host, _ := os.Hostname()
	ri := &RunInfo{Version: v, GoVersion: b.GoVersion, Host: host, Platform: b.Platform, CPUs: runtime.NumCPU(), CPU: cpuModel()}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		ri.Kernel = strings.TrimSpace(string(k))
	}
	return ri
}

// cpuModel is the first "model name" of /proc/cpuinfo ("" elsewhere).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Header prefixes of the RunInfo lines.
const (
	versionPrefix = "Version: "
	machinePrefix = "Machine: "
)

// lines are the header lines of ri (without "# ").
func (ri *RunInfo) lines() []string {
	if ri == nil {
		return nil
	}
	m := fmt.Sprintf("%s%s, %s, %d CPUs", machinePrefix, orDash(ri.Host), ri.Platform, ri.CPUs)
	if ri.CPU != "" {
		m += ", " + ri.CPU
	}
	if ri.Kernel != "" {
		m += ", kernel " + ri.Kernel
	}
	return []string{fmt.Sprintf("%sgoarmci %s, %s", versionPrefix, ri.Version, ri.GoVersion), m}
}

// parseRunLine fills ri from a "Version:" or "Machine:" header line read back by ParseOSU; it
// reports whether the line was one. Only the version and Go version are recovered from the
// version line; the machine line is kept whole in Host.
func (ri *RunInfo) parseRunLine(h string) bool {
	switch {
	case strings.HasPrefix(h, versionPrefix):
		v := strings.TrimPrefix(strings.TrimPrefix(h, versionPrefix), "goarmci ")
		if i := strings.LastIndex(v, ", "); i >= 0 {
			ri.Version, ri.GoVersion = v[:i], v[i+2:]
		} else {
			ri.Version = v
		}
		return true
	case strings.HasPrefix(h, machinePrefix):
		ri.Host = strings.TrimPrefix(h, machinePrefix)
		return true
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// headerLines are a result's header lines as written: its Header, a "Transport:" line when the
// Header has none and the transport is known, then the RunInfo lines.
func headerLines(header []string, transport string, ranks int, run *RunInfo) []string {
	out := append([]string(nil), header...)
	hasTransport := false
	for _, h := range header {
		if strings.HasPrefix(h, "Transport:") {
			hasTransport = true
		}
	}
	if !hasTransport && transport != "" {
		t := "Transport: " + transport
		if ranks > 0 {
			t += fmt.Sprintf(", %d ranks", ranks)
		}
		out = append(out, t)
	}
	return append(out, run.lines()...)
}
