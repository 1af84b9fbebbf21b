// SPDX-License-Identifier: Apache-2.0

package remoteledger

/*
#cgo pkg-config: libzstd
#include <zstd.h>

// rl_go_unzstd_step is one ZSTD_decompressStream on the window [*in_pos, in_size) of src into
// [*out_pos, out_cap) of dst, so that Go passes no struct holding a pointer.
static size_t rl_go_unzstd_step(ZSTD_DCtx *d, const void *src, size_t in_size, size_t *in_pos,
                                void *dst, size_t out_cap, size_t *out_pos) {
	ZSTD_inBuffer in = {src, in_size, *in_pos};
	ZSTD_outBuffer out = {dst, out_cap, *out_pos};
	size_t r = ZSTD_decompressStream(d, &out, &in);
	*in_pos = in.pos;
	*out_pos = out.pos;
	return r;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// unzstd decodes every zstd frame of src (RFC 8878 allows several, and skippable ones), in
// order, into one slice of at most max bytes (max < 0: no bound). An error names the cause:
// libzstd's for a corrupt frame, "truncated" for input ending inside one, the bound for output
// past it.
func unzstd(src []byte, max int64) ([]byte, error) {
	if len(src) == 0 {
		return nil, errors.New("zstd: empty input")
	}
	d := C.ZSTD_createDCtx()
	if d == nil {
		return nil, errors.New("zstd: cannot create a decompression context")
	}
	defer C.ZSTD_freeDCtx(d)

	size := int64(C.ZSTD_DStreamOutSize())
	if n := int64(C.ZSTD_getFrameContentSize(unsafe.Pointer(&src[0]), C.size_t(len(src)))); n >= 0 &&
		uint64(n) < uint64(C.ZSTD_CONTENTSIZE_ERROR) {
		size = n + 1 // room to see the end without growing, when the first frame is all there is
	}
	if size < 1024 {
		size = 1024 // a skippable first frame says 0
	}
	if size > 64<<20 {
		size = 64 << 20 // a frame's header is not trusted with an allocation: grow past it as it decodes
	}
	if max >= 0 && size > max+1 {
		size = max + 1
	}
	out := make([]byte, 0, size)
	var inPos C.size_t
	for {
		if len(out) == cap(out) {
			if max >= 0 && int64(len(out)) > max {
				return nil, fmt.Errorf("zstd: decodes to more than %d bytes", max)
			}
			grow := int64(cap(out))
			if max >= 0 && int64(cap(out))+grow > max+1 {
				grow = max + 1 - int64(cap(out))
			}
			out = append(out[:cap(out)], make([]byte, grow)...)[:len(out)]
		}
		outPos := C.size_t(len(out))
		r := C.rl_go_unzstd_step(d, unsafe.Pointer(&src[0]), C.size_t(len(src)), &inPos,
			unsafe.Pointer(&out[:cap(out)][0]), C.size_t(cap(out)), &outPos)
		if C.ZSTD_isError(r) != 0 {
			return nil, fmt.Errorf("zstd: %s", C.GoString(C.ZSTD_getErrorName(r)))
		}
		out = out[:outPos]
		switch {
		case max >= 0 && int64(len(out)) > max:
			return nil, fmt.Errorf("zstd: decodes to more than %d bytes", max)
		case r == 0 && int(inPos) == len(src):
			return out, nil // every frame whole and flushed
		case int(inPos) < len(src), len(out) == cap(out):
			// more input, or output to flush: go on (a frame's end starts the next)
		default:
			return nil, errors.New("zstd: truncated: the input ends inside a frame")
		}
	}
}
