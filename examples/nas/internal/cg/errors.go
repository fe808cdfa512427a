package cg

import "errors"

// ErrRange is returned for a row block outside the matrix or class parameters out of range.
var ErrRange = errors.New("cg: row range out of bounds")
