package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLauncherDoesNotLinkPlotting keeps the plotting stack out of goarmci's build: the first
// `go run ./cmd/goarmci` must not compile gonum/plot, its fonts and image encoders.
func TestLauncherDoesNotLinkPlotting(t *testing.T) {
	out, err := exec.Command(goTool(), "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/goarmci/goarmci/bench")
	for _, d := range deps {
		for _, bad := range []string{"gonum.org/v1/plot", "codeberg.org/go-", "golang.org/x/image", "github.com/ajstarks/svgo", "git.sr.ht/~sbinet/gg"} {
			assert.False(t, strings.HasPrefix(d, bad), "goarmci depends on %s", d)
		}
	}
}

func TestFindPlotter(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no goarmci-plot in PATH
	srcDir, err := filepath.Abs(".")
	require.NoError(t, err)
	root := filepath.Dir(filepath.Dir(srcDir))

	// Beside the executable first.
	dir := t.TempDir()
	exe := filepath.Join(dir, "goarmci")
	require.NoError(t, os.WriteFile(filepath.Join(dir, plotCmd), []byte("#!/bin/sh\n"), 0o755))
	p, err := findPlotter(exe, "v1.2.3", srcDir)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, plotCmd)}, p.argv)
	assert.Empty(t, p.note)

	// A released version: go run of the same version.
	other := filepath.Join(t.TempDir(), "goarmci")
	p, err = findPlotter(other, "v1.2.3", srcDir)
	require.NoError(t, err)
	assert.Equal(t, []string{goTool(), "run", plotPkg + "@v1.2.3"}, p.argv)
	assert.NotEmpty(t, p.note)

	// Built from source: go run in the module root.
	p, err = findPlotter(other, "(devel)", srcDir)
	require.NoError(t, err)
	assert.Equal(t, []string{goTool(), "run", "./cmd/goarmci-plot"}, p.argv)
	assert.Equal(t, root, p.dir)

	// Nothing: the error says how to install it.
	_, err = findPlotter(other, "", "cmd/goarmci")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "go install "+plotPkg+"@latest")
}
