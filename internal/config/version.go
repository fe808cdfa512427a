package config

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// ModulePath is goarmci's module path.
const ModulePath = "github.com/goarmci/goarmci"

// Build describes the running binary, from the Go build information (runtime/debug).
type Build struct {
	// Version is goarmci's module version: a release ("v1.2.0"), a pseudo-version, or
	// "(devel)" for a binary built inside goarmci's own source tree.
	Version string `json:"version"`
	// Revision, Time and Modified are the VCS commit the binary was built from, its time and
	// whether the checkout had uncommitted changes; empty when the build recorded no VCS
	// information (go run, go test, -buildvcs=false, or goarmci built as a dependency).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the Go release that built the binary ("go1.26.8").
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// BuildInfo returns the running binary's Build. A program that uses goarmci as a dependency
// gets goarmci's required version.
func BuildInfo() Build { return buildFrom(debug.ReadBuildInfo()) }

func buildFrom(bi *debug.BuildInfo, ok bool) Build {
	b := Build{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	if bi.Main.Path == ModulePath {
		b.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		return b
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath {
			b.Version = d.Version
			if d.Replace != nil && d.Replace.Version != "" {
				b.Version = d.Replace.Version
			}
		}
	}
	return b
}

// String is the one-line form `goarmci version` prints:
// "goarmci (devel) revision 1a2b3c4d5e6f (2026-11-25T10:00:00Z, modified) go1.26.8 linux/amd64".
func (b Build) String() string {
	var s strings.Builder
	s.WriteString("goarmci ")
	s.WriteString(b.Version)
	if b.Revision != "" {
		s.WriteString(" revision ")
		s.WriteString(shortRev(b.Revision))
		var extra []string
		if b.Time != "" {
			extra = append(extra, b.Time)
		}
		if b.Modified {
			extra = append(extra, "modified")
		}
		if len(extra) > 0 {
			s.WriteString(" (" + strings.Join(extra, ", ") + ")")
		}
	}
	s.WriteString(" " + b.GoVersion + " " + b.Platform)
	return s.String()
}

// shortRev is the first 12 characters of a revision.
func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
