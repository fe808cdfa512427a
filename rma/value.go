package rma

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
)

// Value is an element type of PutValue and GetValue (ARMCI_PutValueInt, ARMCI_PutValueLong,
// ARMCI_PutValueFloat, ARMCI_PutValueDouble and the GetValue calls).
type Value interface {
	int32 | int64 | float32 | float64
}

// valueBufs holds the 8-byte buffers of PutValue and GetValue: a buffer handed to a transfer
// escapes, so a stack array would cost an allocation per call.
var valueBufs = sync.Pool{New: func() any { return new([8]byte) }}

// PutValue stores v, little-endian, at byte offset off of rank proc's part of seg
// (ARMCI_PutValueInt/Long/Float/Double): a Put of one value, with Put's completion and errors.
func PutValue[T Value](ctx context.Context, rt *Runtime, v T, seg *Segment, proc, off int) error {
	b := valueBufs.Get().(*[8]byte)
	defer valueBufs.Put(b)
	return rt.Put(ctx, b[:encodeValue(v, b)], seg, proc, off)
}

// encodeValue writes v little-endian into b and returns its size in bytes.
func encodeValue[T Value](v T, b *[8]byte) int {
	switch x := any(v).(type) {
	case int32:
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		return 4
	case float32:
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		return 4
	case int64:
		binary.LittleEndian.PutUint64(b[:], uint64(x))
	case float64:
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
	}
	return 8
}

// GetValue loads the value of type T, little-endian, at byte offset off of rank proc's part of
// seg (ARMCI_GetValueInt/Long/Float/Double): a Get of one value, with Get's errors.
func GetValue[T Value](ctx context.Context, rt *Runtime, seg *Segment, proc, off int) (T, error) {
	b := valueBufs.Get().(*[8]byte)
	defer valueBufs.Put(b)
	var z T
	n := 8
	switch any(z).(type) {
	case int32, float32:
		n = 4
	}
	if err := rt.Get(ctx, seg, proc, off, b[:n]); err != nil {
		return z, err
	}
	switch p := any(&z).(type) {
	case *int32:
		*p = int32(binary.LittleEndian.Uint32(b[:]))
	case *float32:
		*p = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
	case *int64:
		*p = int64(binary.LittleEndian.Uint64(b[:]))
	case *float64:
		*p = math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	}
	return z, nil
}
