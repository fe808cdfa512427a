package layers

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestViolationsReportsUpwardImports checks the checker: an import of a higher layer is reported,
// imports of the same folder, of lower layers and from outside the module are not.
func TestViolationsReportsUpwardImports(t *testing.T) {
	const mod = "example.com/m"
	got := Violations(mod, map[string][]string{
		mod + "/ibv/provider/shm": {mod + "/internal/accum", mod + "/ibv", "golang.org/x/sys/unix"},
		mod + "/ibv":              {mod + "/rma"}, // upward: 1 → 4
		mod + "/rma":              {mod + "/multirail", mod + "/rma/rmatest"},
		mod + "/window":           {mod + "/cmd/goarmci"}, // upward: 5 → 8
		mod + "/examples/nas/cg":  {mod + "/examples/nas/internal/cg", mod + "/globalarray"},
		"other.org/x":             {mod + "/cmd/goarmci"},
	})
	require.Len(t, got, 2, "%v", got)
	require.Contains(t, got[0], mod+"/ibv (ibv, rank 1) imports "+mod+"/rma (rma, rank 4)")
	require.Contains(t, got[1], mod+"/window (window, rank 5) imports "+mod+"/cmd/goarmci")
}

// TestModuleLayers checks every package of this module (its Go files, tests included) against
// the layer rule.
func TestModuleLayers(t *testing.T) {
	root, mod := moduleRoot(t)
	imports := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := mod
		if rel != "." {
			pkg = mod + "/" + filepath.ToSlash(rel)
		}
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			imports[pkg] = append(imports[pkg], p)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(imports), 20, "found too few packages under %s", root)
	require.Empty(t, Violations(mod, imports))
}

// moduleRoot finds the directory of go.mod above this package and the module path it declares.
func moduleRoot(t *testing.T) (dir, mod string) {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s/go.mod declares no module", dir)
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}
