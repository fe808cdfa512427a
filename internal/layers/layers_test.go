package layers

import (
	"bufio"
	"go/ast"
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

// TestUnsafeFile checks the file-name rule of package unsafe.
func TestUnsafeFile(t *testing.T) {
	for _, p := range []string{"a/mr_unsafe.go", "x_unsafe_test.go", "rep_unsafe_amd64.go", "rep_other_unsafe.go", "b_unsafe_amd64_test.go"} {
		require.True(t, UnsafeFile(p), p)
	}
	for _, p := range []string{"mr.go", "unsafe.go", "a_unsafe/x.go", "x_unsafety.go", "x_test.go", "x_unsafe.go.orig"} {
		require.False(t, UnsafeFile(p), p)
	}
}

// TestModuleUnsafe checks that no Go file of this module imports package unsafe unless
// UnsafeFile allows it.
func TestModuleUnsafe(t *testing.T) {
	root, _ := moduleRoot(t)
	var bad []string
	n := 0
	walkGoFiles(t, root, parser.ImportsOnly, func(path string, f *ast.File) {
		for _, is := range f.Imports {
			if is.Path.Value == `"unsafe"` {
				n++
				if !UnsafeFile(path) {
					rel, _ := filepath.Rel(root, path)
					bad = append(bad, rel)
				}
			}
		}
	})
	require.Empty(t, bad, "files importing unsafe must be named <what>_unsafe.go (or _unsafe_test.go, _unsafe_<arch>.go)")
	require.Positive(t, n, "no file imports unsafe: is the walk broken?")
}

// TestModuleLayers checks every package of this module (its Go files, tests included) against
// the layer rule.
func TestModuleLayers(t *testing.T) {
	root, mod := moduleRoot(t)
	imports := map[string][]string{}
	walkGoFiles(t, root, parser.ImportsOnly, func(path string, f *ast.File) {
		rel, err := filepath.Rel(root, filepath.Dir(path))
		require.NoError(t, err)
		pkg := mod
		if rel != "." {
			pkg = mod + "/" + filepath.ToSlash(rel)
		}
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			require.NoError(t, err)
			imports[pkg] = append(imports[pkg], p)
		}
	})
	require.Greater(t, len(imports), 20, "found too few packages under %s", root)
	require.Empty(t, Violations(mod, imports))
}

// walkGoFiles calls fn with every Go file, parsed in mode, of the module under root (tests
// included; hidden folders, testdata and folders starting with _ skipped).
func walkGoFiles(t *testing.T, root string, mode parser.Mode, fn func(path string, f *ast.File)) {
	t.Helper()
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
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		fn(path, f)
		return nil
	})
	require.NoError(t, err)
}

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
