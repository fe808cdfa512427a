package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInternalLeaks checks the checker on small sources: every way an exported declaration can
// show an internal type is reported, unexported and body-only uses are not.
func TestInternalLeaks(t *testing.T) {
	const mod = "example.com/m"
	for _, tc := range []struct {
		name, pkg, src string
		want           []string // the declarations reported
	}{
		{name: "alias and typed constants", pkg: mod + "/ibv", src: `package ibv
import "example.com/m/internal/accum"
type AccType = accum.Type
const AccInt32 = accum.Int32
const AccInt64 accum.Type = 2
var ErrType error = accum.ErrType
type accType = accum.Type
const accInt = accum.Int32`,
			want: []string{"AccType", "AccInt32", "AccInt64"}},
		{name: "signatures", pkg: mod + "/hybridft", src: `package hybridft
import cfg "example.com/m/internal/config"
type Options struct{}
type Manager struct{}
func OptionsFrom(c cfg.Config) Options { return Options{} }
func Load() (*cfg.Config, error) { return nil, nil }
func (m *Manager) Config() cfg.Config { return cfg.Config{} }
func (m *Manager) config() cfg.Config { return cfg.Config{} }
type manager struct{}
func (m manager) Config() cfg.Config { return cfg.Config{} }
func Default() Options { c := cfg.Default(); _ = c; return Options{} }
func Map[T cfg.Knob]() {}`,
			want: []string{"OptionsFrom", "Load", "Manager.Config", "Map"}},
		{name: "struct fields, interfaces, nested types", pkg: mod + "/rma", src: `package rma
import (
	"example.com/m/internal/accum"
	"example.com/m/ibv/internal/hook"
)
type Segment struct {
	Lock *accum.Lock
	lock *accum.Lock
	hook.Driver
	Views map[string][]func(accum.Type) error
}
type private struct{ Lock *accum.Lock }
type Kernel interface {
	Apply(t accum.Type) error
	apply(t accum.Type) error
}
type Hidden struct{ inner struct{ T accum.Type } }
type Shown struct{ Inner struct{ T accum.Type } }
var Default = accum.New()
var Apply = func() error { return accum.Apply() }`,
			want: []string{"Segment", "Segment", "Segment", "Kernel", "Shown", "Default"}},
		{name: "internal packages, main and other imports are not checked", pkg: mod + "/ibv/internal/engine", src: `package engine
import "example.com/m/internal/accum"
type T = accum.Type`},
		{name: "package main", pkg: mod + "/cmd/goarmci", src: `package main
import "example.com/m/internal/config"
func Load() config.Config { return config.Config{} }`},
		{name: "non-internal imports", pkg: mod + "/rma", src: `package rma
import (
	"example.com/m/ibv"
	"example.com/other/internal/x"
	"internal/race"
)
type AccType = ibv.AccType
type X = x.T
var R = race.Enabled`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", tc.src, parser.SkipObjectResolution)
			require.NoError(t, err)
			var got []string
			for _, l := range InternalLeaks(mod, tc.pkg, f) {
				require.True(t, strings.HasPrefix(l, tc.pkg+": "), l)
				decl, _, ok := strings.Cut(strings.TrimPrefix(l, tc.pkg+": "), " mentions ")
				require.True(t, ok, l)
				got = append(got, decl)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestModuleInternalLeaks checks that no exported declaration of a non-internal package of this
// module shows a type of one of its internal packages (test files excluded: they are not API).
func TestModuleInternalLeaks(t *testing.T) {
	root, mod := moduleRoot(t)
	var bad []string
	files := 0
	walkGoFiles(t, root, parser.SkipObjectResolution, func(path string, f *ast.File) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		require.NoError(t, err)
		pkg := mod
		if rel != "." {
			pkg = mod + "/" + filepath.ToSlash(rel)
		}
		files++
		bad = append(bad, InternalLeaks(mod, pkg, f)...)
	})
	require.Greater(t, files, 100, "found too few files under %s", root)
	sort.Strings(bad)
	require.Empty(t, bad, "exported API must not show internal types: give the package its own type (and convert at the call into the internal package), or unexport the declaration")
}
