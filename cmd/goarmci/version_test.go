package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/config"
)

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "version")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, config.BuildInfo().String()+"\n", out)
	code, out2, _ := runCLI(t, "--version")
	require.Equal(t, 0, code)
	assert.Equal(t, out, out2, "--version prints what version prints")

	code, js, _ := runCLI(t, "version", "--json")
	require.Equal(t, 0, code)
	var b config.Build
	require.NoError(t, json.Unmarshal([]byte(js), &b), js)
	assert.Equal(t, runtime.Version(), b.GoVersion)
	assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, b.Platform)

	code, _, _ = runCLI(t, "version", "extra")
	assert.Equal(t, 2, code)
}

// moduleVersion matches the main module's version go build stamps: "(devel)", or from a git
// checkout a pseudo-version (go1.24 on: v0.0.0-<time>-<revision>, "+dirty" with uncommitted
// changes) or a tag.
const moduleVersion = `(\(devel\)|v[0-9]+\.[0-9]+\.[0-9]+\S*)`

// TestVersionOfBuiltBinary checks the built command: the module version (moduleVersion), and
// the VCS revision when the build recorded one (go build in a git checkout, unless
// -buildvcs=false).
func TestVersionOfBuiltBinary(t *testing.T) {
	out, err := exec.Command(goarmciExe, "version").Output()
	require.NoError(t, err)
	line := strings.TrimSpace(string(out))
	assert.Regexp(t, `^goarmci `+moduleVersion+`( revision [0-9a-f]{12}( \([^)]*\))?)? go1\.[0-9.]+\S* `+runtime.GOOS+"/"+runtime.GOARCH+`$`, line)
	mod, err := exec.Command(goTool(), "version", "-m", goarmciExe).Output()
	require.NoError(t, err)
	for _, l := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			assert.Contains(t, line, " revision "+strings.TrimPrefix(f[1], "vcs.revision=")[:12])
		}
	}
	v, err := exec.Command(goarmciExe, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, string(out), string(v))
}
