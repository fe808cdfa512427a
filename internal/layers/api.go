package layers

import (
	"go/ast"
	"go/token"
	"path"
	"strconv"
	"strings"
)

// internalPath reports whether package path p is internal to its parent (has an "internal"
// element), so that only the module itself may import it.
func internalPath(p string) bool {
	return p == "internal" || strings.HasPrefix(p, "internal/") || strings.HasSuffix(p, "/internal") || strings.Contains(p, "/internal/")
}

// InternalLeaks returns one line per exported declaration of f (a non-test file of package pkg of
// module mod) whose type mentions a package of the module that is internal (a path with an
// "internal" element): a user of pkg could see the internal type but neither name nor import it.
// Checked, syntactically: the signatures of exported functions and of the exported methods of
// exported types, exported type declarations (alias targets included; of a struct only its
// exported and embedded fields, of an interface its exported and embedded methods), and the
// types of exported constants and variables; one declared without a type takes it from its
// value, so a value that mentions an internal package is reported too (write the type out if
// it is not internal). Files of internal packages and of package main are not checked.
func InternalLeaks(mod, pkg string, f *ast.File) []string {
	if f.Name.Name == "main" || internalPath(strings.TrimPrefix(pkg, mod+"/")) {
		return nil
	}
	c := leakChecker{pkg: pkg, imports: map[string]string{}}
	for _, is := range f.Imports {
		p, err := strconv.Unquote(is.Path.Value)
		if err != nil || !strings.HasPrefix(p, mod+"/") || !internalPath(strings.TrimPrefix(p, mod+"/")) {
			continue
		}
		name := path.Base(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		c.imports[name] = p
	}
	if len(c.imports) == 0 {
		return nil
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				recv := receiverName(d.Recv.List[0].Type)
				if !token.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			c.check(name, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						if s.TypeParams != nil {
							c.check(s.Name.Name, s.TypeParams)
						}
						c.check(s.Name.Name, s.Type)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						if s.Type != nil {
							c.check(n.Name, s.Type)
							continue
						}
						for _, v := range s.Values {
							c.check(n.Name, v)
						}
					}
				}
			}
		}
	}
	return c.out
}

type leakChecker struct {
	pkg     string
	imports map[string]string // name in the file → internal package path
	out     []string
}

// check reports every identifier qualified by an internal import in the part of n a user sees.
func (c *leakChecker) check(decl string, n ast.Node) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.StructType:
			for _, f := range n.Fields.List {
				if len(f.Names) == 0 || anyExported(f.Names) {
					c.check(decl, f.Type)
				}
			}
			return false
		case *ast.InterfaceType:
			for _, m := range n.Methods.List {
				if len(m.Names) == 0 || anyExported(m.Names) {
					c.check(decl, m.Type)
				}
			}
			return false
		case *ast.FuncLit: // its body is not part of the declaration's type
			c.check(decl, n.Type)
			return false
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				if p, ok := c.imports[id.Name]; ok {
					c.out = append(c.out, c.pkg+": "+decl+" mentions "+p+"."+n.Sel.Name)
					return false
				}
			}
		}
		return true
	})
}

func anyExported(ids []*ast.Ident) bool {
	for _, id := range ids {
		if id.IsExported() {
			return true
		}
	}
	return false
}

// receiverName is the type name of a method receiver: T, *T, T[P], *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
