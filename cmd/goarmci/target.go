package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// resolveTarget turns run's PROGRAM|PACKAGE argument into an executable path. A directory, a
// .go file or a path that does not exist but looks like an import path is built once with
// `go build -o` into a temporary directory (removed by cleanup); an existing file is run as is;
// a bare name is looked up in PATH.
func resolveTarget(target string, stderr io.Writer) (exe string, cleanup func(), err error) {
	cleanup = func() {}
	st, statErr := os.Stat(target)
	switch {
	case statErr == nil && st.IsDir(), statErr == nil && strings.HasSuffix(target, ".go"):
		return goBuild(target, stderr)
	case statErr == nil:
		if st.Mode()&0o111 == 0 {
			return "", cleanup, fmt.Errorf("%s is not executable", target)
		}
		abs, err := filepath.Abs(target)
		return abs, cleanup, err
	case !strings.Contains(target, "/"):
		p, err := exec.LookPath(target)
		if err != nil {
			return "", cleanup, fmt.Errorf("program %q: %w", target, err)
		}
		return p, cleanup, nil
	case strings.HasPrefix(target, ".") || filepath.IsAbs(target):
		return "", cleanup, fmt.Errorf("%s: %w", target, statErr)
	default:
		return goBuild(target, stderr) // an import path
	}
}

// goBuild builds pkg (a directory, .go file or import path) into a temporary directory.
func goBuild(pkg string, stderr io.Writer) (string, func(), error) {
	dir, err := os.MkdirTemp("", "goarmci-run-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	name := filepath.Base(strings.TrimSuffix(filepath.Clean(pkg), ".go"))
	if name == "." || name == "/" || name == "" {
		name = "prog"
	}
	exe := filepath.Join(dir, name)
	cmd := exec.Command(goTool(), "build", "-o", exe, pkg)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("go build %s: %w", pkg, err)
	}
	return exe, cleanup, nil
}

// goTool is the go command: from PATH, else from $GOROOT/bin.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}
