package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/goarmci/goarmci/bench"
)

// plotCmd is the command that draws plots (cmd/goarmci-plot). goarmci does not link the
// plotting stack (gonum/plot, its fonts and image encoders): it would make the launcher's
// first build several times longer for a feature only bench -plot uses.
const plotCmd = "goarmci-plot"

// plotPkg is plotCmd's import path.
const plotPkg = "github.com/goarmci/goarmci/cmd/goarmci-plot"

// plotter is how to run plotCmd: a program and its leading arguments, the directory to run it
// in ("" = the current one), and a note for the user when it compiles first (go run).
type plotter struct {
	argv []string
	dir  string
	note string
}

// findPlotter picks plotCmd: beside the goarmci executable exe, else in PATH, else `go run` of
// the released version goarmci was installed at, else `go run` in the module source goarmci
// was built from (srcDir, the directory of this file at build time).
func findPlotter(exe, version, srcDir string) (plotter, error) {
	if exe != "" {
		p := filepath.Join(filepath.Dir(exe), plotCmd)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return plotter{argv: []string{p}}, nil
		}
	}
	if p, err := exec.LookPath(plotCmd); err == nil {
		return plotter{argv: []string{p}}, nil
	}
	if version != "" && version != "(devel)" {
		at := plotPkg + "@" + version
		return plotter{argv: []string{goTool(), "run", at},
			note: fmt.Sprintf("plotting through `go run %s` (install it beside goarmci to skip the build)", at)}, nil
	}
	if srcDir != "" && filepath.IsAbs(srcDir) {
		root := filepath.Dir(filepath.Dir(srcDir)) // .../cmd/goarmci -> module root
		if _, err := os.Stat(filepath.Join(root, "cmd", plotCmd, "main.go")); err == nil {
			return plotter{argv: []string{goTool(), "run", "./cmd/" + plotCmd}, dir: root,
				note: fmt.Sprintf("plotting through `go run ./cmd/%s` in %s (go build -o %s ./cmd/%s skips the build)",
					plotCmd, root, filepath.Join(filepath.Dir(exe), plotCmd), plotCmd)}, nil
		}
	}
	return plotter{}, fmt.Errorf("plots are drawn by %s, which is neither beside goarmci nor in PATH: go install %s@latest", plotCmd, plotPkg)
}

// thisPlotter finds the plot command of this executable.
func thisPlotter() (plotter, error) {
	exe, _ := os.Executable()
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == "github.com/goarmci/goarmci" {
		version = bi.Main.Version
	}
	_, file, _, _ := runtime.Caller(0)
	return findPlotter(exe, version, filepath.Dir(file))
}

// renderPlots hands the requests to the plot command (one run for all of them).
func renderPlots(stderr io.Writer, reqs []bench.PlotRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	p, err := thisPlotter()
	if err != nil {
		return err
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for i := range reqs {
		if abs, err := filepath.Abs(reqs[i].Path); err == nil {
			reqs[i].Path = abs // go run may run in another directory
		}
		if err := enc.Encode(reqs[i]); err != nil {
			return fmt.Errorf("plot %s: %w", reqs[i].Path, err)
		}
	}
	if p.note != "" {
		fmt.Fprintf(stderr, "goarmci: bench: %s\n", p.note)
	}
	cmd := exec.Command(p.argv[0], append(p.argv[1:], "-requests")...)
	cmd.Dir = p.dir
	cmd.Stdin = &in
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(p.argv, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
