package config

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuildString(t *testing.T) {
	b := Build{Version: "v1.2.0", Revision: "0123456789abcdef0123", Time: "2026-11-25T10:00:00Z", Modified: true,
		GoVersion: "go1.26.8", Platform: "linux/amd64"}
	assert.Equal(t, "goarmci v1.2.0 revision 0123456789ab (2026-11-25T10:00:00Z, modified) go1.26.8 linux/amd64", b.String())
	b = Build{Version: "(devel)", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	assert.Equal(t, "goarmci (devel) go1.26.8 linux/arm64", b.String())
}

func TestBuildInfoOfTestBinary(t *testing.T) {
	b := BuildInfo()
	assert.Equal(t, runtime.Version(), b.GoVersion)
	assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, b.Platform)
	assert.NotEmpty(t, b.Version)
}

func TestBuildFromBuildInfo(t *testing.T) {
	main := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: ModulePath, Version: "v1.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef0123456789"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}}
	b := buildFrom(main, true)
	assert.Equal(t, Build{Version: "v1.3.0", Revision: "abcdef0123456789", Time: "2026-11-25T10:00:00Z", GoVersion: "go1.26.8",
		Platform: runtime.GOOS + "/" + runtime.GOARCH}, b)

	// goarmci as a dependency of another program: its required version, no revision.
	dep := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
		Deps:     []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.49.0"}, {Path: ModulePath, Version: "v1.2.0"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ffff"}}}
	b = buildFrom(dep, true)
	assert.Equal(t, "v1.2.0", b.Version)
	assert.Empty(t, b.Revision, "the revision is the application's, not goarmci's")

	assert.Equal(t, "(unknown)", buildFrom(nil, false).Version)
}
