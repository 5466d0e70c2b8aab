package checkpoint

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"io"
	"sort"
	"strings"
)

// Element sizes from file headers: the codec's planes must start at an
// element's first byte, so a known format's tensors become regions of their
// dtype's size; everything else (and formats whose header is unreadable) is
// one region of unknown element size, tried per chunk.

// region is a byte range of a file with one element size (0: unknown).
type region struct {
	Off, Len int64
	Elem     int
}

// dtypeSize is the element size of a safetensors dtype (0: not a plane
// candidate; sub-byte and 8-byte types are coded by trial).
var dtypeSize = map[string]int{
	"BF16": 2, "F16": 2, "I16": 2, "U16": 2,
	"F32": 4, "I32": 4, "U32": 4,
	"F64": 8, "I64": 8, "U64": 8,
	"F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1,
}

// fileRegions reads r's header, when name says it is a known format, and
// returns regions covering [0, size) in order. Unknown or unreadable: one
// region of element size 0.
func fileRegions(name string, r io.ReaderAt, size int64) []region {
	var rs []region
	switch {
	case strings.HasSuffix(name, ".safetensors"):
		rs = safetensorsRegions(r, size)
	case strings.HasSuffix(name, ".pt") || strings.HasSuffix(name, ".pth") || strings.HasSuffix(name, ".bin"):
		rs = torchZipRegions(r, size)
	}
	if rs == nil {
		return []region{{0, size, 0}}
	}
	return fillGaps(rs, size)
}

// safetensorsRegions: u64 header length, JSON {name: {dtype, shape,
// data_offsets: [begin, end]}} relative to the end of the header.
func safetensorsRegions(r io.ReaderAt, size int64) []region {
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil
	}
	hl := int64(binary.LittleEndian.Uint64(lb[:]))
	if hl <= 0 || hl > 100<<20 || 8+hl > size {
		return nil
	}
	hb := make([]byte, hl)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return nil
	}
	var hdr map[string]json.RawMessage
	if json.Unmarshal(hb, &hdr) != nil {
		return nil
	}
	rs := []region{{0, 8 + hl, 1}}
	for k, v := range hdr {
		if k == "__metadata__" {
			continue
		}
		var t struct {
			Dtype   string  `json:"dtype"`
			Offsets []int64 `json:"data_offsets"`
		}
		if json.Unmarshal(v, &t) != nil || len(t.Offsets) != 2 || t.Offsets[1] < t.Offsets[0] {
			return nil
		}
		b, e := 8+hl+t.Offsets[0], 8+hl+t.Offsets[1]
		if e > size {
			return nil
		}
		rs = append(rs, region{b, e - b, dtypeSize[t.Dtype]})
	}
	return rs
}

// torchZipRegions: torch.save's zip (entries stored, not deflated, each
// storage in <archive>/data/<key>, 64-byte aligned). The storages' dtypes
// are in data.pkl; their element size is tried per chunk, which finds it
// (2 or 4) on tensor data. The zip's own records and the pickle are
// element size 1.
func torchZipRegions(r io.ReaderAt, size int64) []region {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil
	}
	rs := []region{}
	for _, f := range zr.File {
		if f.Method != zip.Store {
			continue
		}
		off, err := f.DataOffset()
		if err != nil || off < 0 || off+int64(f.UncompressedSize64) > size {
			return nil
		}
		elem := 1
		if strings.Contains(f.Name, "/data/") {
			elem = 0
		}
		rs = append(rs, region{off, int64(f.UncompressedSize64), elem})
	}
	return rs
}

// fillGaps sorts rs, drops overlaps (a damaged header: its claims are only
// hints, never trusted for correctness), fills the gaps with element size 1
// and merges neighbours of one element size.
func fillGaps(rs []region, size int64) []region {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Off < rs[j].Off })
	var out []region
	pos := int64(0)
	add := func(r region) {
		if r.Len <= 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Elem == r.Elem && out[n-1].Off+out[n-1].Len == r.Off {
			out[n-1].Len += r.Len
			return
		}
		out = append(out, r)
	}
	for _, r := range rs {
		if r.Off < pos {
			return []region{{0, size, 0}}
		}
		add(region{pos, r.Off - pos, 1})
		add(r)
		pos = r.Off + r.Len
	}
	add(region{pos, size - pos, 1})
	return out
}

// chunkPlan cuts regions into codec chunks of at most chunk bytes.
func chunkPlan(rs []region, chunk int) []region {
	var out []region
	for _, r := range rs {
		for off := int64(0); off < r.Len; off += int64(chunk) {
			out = append(out, region{r.Off + off, min(int64(chunk), r.Len-off), r.Elem})
		}
	}
	return out
}
