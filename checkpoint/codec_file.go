package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/semaphore"
)

// ChunkError names the chunk of a trz file that failed to decode or verify.
type ChunkError struct {
	Chunk  int   // index in the file's chunk index
	RawOff int64 // where the chunk's bytes start in the original file
	What   string
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("chunk %d (original bytes from %d): %s", e.Chunk, e.RawOff, e.What)
}

// codecOpts tune one file's coding.
type codecOpts struct {
	Workers int   // parallel coders (default: all cores)
	Chunk   int   // codec chunk (default DefaultCodecChunk)
	Span    int64 // the manifest's hash chunk: the raw digest is computed with it
}

func (o codecOpts) norm() codecOpts {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultCodecChunk
	}
	o.Chunk = min(o.Chunk, MaxCodecChunk) // what a reader accepts
	if o.Span <= 0 {
		o.Span = DefaultChunkBytes
	}
	return o
}

// spanHasher computes the store's chunked xxh64 (see combineChunks) of a
// stream fed in order.
type spanHasher struct {
	span, in int64
	d        *xxhash.Digest
	sums     []uint64
}

func newSpanHasher(span int64) *spanHasher { return &spanHasher{span: span, d: xxhash.New()} }

func (h *spanHasher) Write(b []byte) {
	for len(b) > 0 {
		n := min(int64(len(b)), h.span-h.in)
		h.d.Write(b[:n])
		h.in += n
		b = b[n:]
		if h.in == h.span {
			h.sums = append(h.sums, h.d.Sum64())
			h.d.Reset()
			h.in = 0
		}
	}
}

func (h *spanHasher) Sum() string {
	if h.in > 0 || len(h.sums) == 0 {
		h.sums = append(h.sums, h.d.Sum64())
	}
	return hex64(combineChunks(h.sums))
}

// ordered runs work(i) for i in [0, n) on workers goroutines, at most
// 2*workers ahead of consume, which sees the results in order. The first
// error stops everything.
func ordered[T any](ctx context.Context, n, workers int, work func(i int) (T, error), consume func(i int, t T) error) error {
	return orderedBytes(ctx, n, workers, nil, work, consume)
}

// inFlight bounds what orderedBytes holds: weight(i) bytes are taken, in
// order, before job i is handed out, and given back once it is consumed.
// Taking them in order cannot deadlock: the job consume waits for has
// always got its bytes. Every weight must be at most limit.
type inFlight struct {
	limit  int64
	weight func(i int) int64
}

// orderedBytes is ordered with the bytes in flight bounded by b (nil: not
// bounded): the number of chunks alone does not bound memory when a chunk's
// size is the input's word.
func orderedBytes[T any](ctx context.Context, n, workers int, b *inFlight, work func(i int) (T, error), consume func(i int, t T) error) error {
	var sem *semaphore.Weighted
	if b != nil {
		sem = semaphore.NewWeighted(b.limit)
	}
	type res struct {
		t   T
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		i  int
		ch chan res
	}
	jobs := make(chan job)
	pending := make(chan chan res, 2*workers)
	go func() {
		defer close(jobs)
		defer close(pending)
		for i := 0; i < n; i++ {
			if sem != nil && sem.Acquire(ctx, b.weight(i)) != nil {
				return
			}
			ch := make(chan res, 1)
			select {
			case pending <- ch:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- job{i, ch}:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		go func() {
			for j := range jobs {
				t, err := work(j.i)
				j.ch <- res{t, err}
			}
		}()
	}
	i := 0
	for ch := range pending {
		var r res
		select {
		case r = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		err := consume(i, r.t)
		if sem != nil {
			sem.Release(b.weight(i))
		}
		if err != nil {
			return err
		}
		i++
	}
	if i < n {
		return ctx.Err()
	}
	return nil
}

// encoded is one coded chunk on its way to the writer.
type encoded struct {
	raw, stored []byte
	c           trzChunk
	done        func()
}

// encodeFile codes the n bytes of src (a file named name, for its header)
// into w, which must be empty and seekable (the index is written last, in
// front). It returns the chunked xxh64 of the raw bytes (opts.Span) and the
// stored size.
func encodeFile(ctx context.Context, name string, src io.ReaderAt, n int64, w io.WriterAt, o codecOpts) (rawXXH string, stored int64, err error) {
	o = o.norm()
	plan := chunkPlan(fileRegions(name, src, n), o.Chunk)
	h := &trzHeader{RawSize: n, ChunkSize: o.Chunk, Chunks: make([]trzChunk, len(plan))}
	off := int64(h.indexLen())
	hasher := newSpanHasher(o.Span)
	work := func(i int) (encoded, error) {
		r := plan[i]
		bp := chunkBufs.get(o.Chunk)
		raw := (*bp)[:r.Len]
		if _, err := src.ReadAt(raw, r.Off); err != nil {
			chunkBufs.put(bp)
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("file ended before byte %d (it shrank while being compressed)", r.Off+r.Len)
			}
			return encoded{}, err
		}
		cd := coderPool.Get().(*coder)
		out, elem, mode := cd.encodeChunk(raw, r.Elem)
		e := encoded{raw: raw, stored: out, c: trzChunk{StoredLen: len(out), RawLen: len(raw), Elem: elem, Mode: mode,
			RawXXH: xxhash.Sum64(raw), StoredXXH: xxhash.Sum64(out)}}
		e.done = func() { coderPool.Put(cd); chunkBufs.put(bp) }
		return e, nil
	}
	consume := func(i int, e encoded) error {
		defer e.done()
		hasher.Write(e.raw)
		if _, err := w.WriteAt(e.stored, off); err != nil {
			return err
		}
		h.Chunks[i] = e.c
		off += int64(len(e.stored))
		return nil
	}
	if err := ordered(ctx, len(plan), o.Workers, work, consume); err != nil {
		return "", 0, err
	}
	if _, err := w.WriteAt(h.marshal(), 0); err != nil {
		return "", 0, err
	}
	return hasher.Sum(), off, nil
}

// bufPools of codec chunks, by size.
type bufPools struct{ m chan *[]byte }

// chunkBufs keeps buffers of up to DefaultCodecChunk (64 of them: at most
// 64 MiB), bigBufs a few up to MaxCodecChunk (16 MiB), so that neither a
// normal pass nor one over the largest chunks a file may declare leaves
// garbage per chunk.
var (
	chunkBufs = bufPools{m: make(chan *[]byte, 64)}
	bigBufs   = bufPools{m: make(chan *[]byte, 4)}
)

func (p bufPools) get(n int) *[]byte {
	if p == chunkBufs && n > DefaultCodecChunk {
		return bigBufs.get(n)
	}
	select {
	case b := <-p.m:
		if cap(*b) >= n {
			*b = (*b)[:n]
			return b
		}
	default:
	}
	b := make([]byte, n)
	return &b
}

func (p bufPools) put(b *[]byte) {
	switch {
	case cap(*b) > MaxCodecChunk:
		return
	case p == chunkBufs && cap(*b) > DefaultCodecChunk:
		p = bigBufs
	}
	select {
	case p.m <- b:
	default:
	}
}

// readTRZIndex reads and checks the header and index of a trz file.
func readTRZIndex(f io.ReaderAt, storedSize int64) (*trzHeader, error) {
	var hb [trzHeaderLen]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return nil, fmt.Errorf("read the trz header: %w", err)
	}
	_, _, n, err := parseTRZHeader(hb[:])
	if err != nil {
		return nil, err
	}
	il := int64(trzHeaderLen) + int64(trzEntryLen)*int64(n)
	if il > storedSize {
		return nil, fmt.Errorf("trz index (%d chunks) is longer than the file (%d bytes): truncated or damaged", n, storedSize)
	}
	b := make([]byte, il)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read the trz index: %w", err)
	}
	h, err := parseTRZIndex(b)
	if err != nil {
		return nil, err
	}
	last := int64(h.indexLen())
	if len(h.Chunks) > 0 {
		c := h.Chunks[len(h.Chunks)-1]
		last = c.StoredOff + int64(c.StoredLen)
	}
	if last != storedSize {
		return nil, fmt.Errorf("trz file is %d bytes, its index says %d: truncated or appended to", storedSize, last)
	}
	return h, nil
}

// decodeInFlight bounds the bytes decodeFile holds at once (stored, raw
// and the coder's planes), whatever the index declares: a crafted index
// cannot make a verify use more, only take longer. It lets about eight
// default chunks decode in parallel.
const decodeInFlight = 16 << 20

// decodeWeight is what decoding chunk c holds: its stored bytes, its raw
// bytes and, for a planes chunk, the planes as large again.
func decodeWeight(c trzChunk) int64 { return int64(c.StoredLen) + 2*int64(c.RawLen) }

// decodeFile decodes the trz file f (storedSize bytes) and, when w is not
// nil, writes the original bytes to it at their offsets. Every chunk's
// stored and raw xxh64 are checked (a mismatch is a *ChunkError); it returns
// the chunked xxh64 of the original (opts.Span) and its size. With
// wantRaw >= 0 (the manifest's size) a file whose header declares another
// size is refused before anything is decoded or written.
func decodeFile(ctx context.Context, f io.ReaderAt, storedSize, wantRaw int64, w io.WriterAt, o codecOpts) (rawXXH string, rawSize int64, err error) {
	o = o.norm()
	h, err := readTRZIndex(f, storedSize)
	if err != nil {
		return "", 0, err
	}
	if wantRaw >= 0 && h.RawSize != wantRaw {
		return "", 0, fmt.Errorf("trz header says the original is %d bytes, the manifest says %d: refused before decoding", h.RawSize, wantRaw)
	}
	hasher := newSpanHasher(o.Span)
	type decoded struct {
		raw  []byte
		done func()
	}
	work := func(i int) (decoded, error) {
		c := h.Chunks[i]
		sp := chunkBufs.get(c.StoredLen)
		stored := (*sp)[:c.StoredLen]
		defer chunkBufs.put(sp)
		if _, err := f.ReadAt(stored, c.StoredOff); err != nil {
			return decoded{}, &ChunkError{i, c.RawOff, "read: " + err.Error()}
		}
		if got := xxhash.Sum64(stored); got != c.StoredXXH {
			return decoded{}, &ChunkError{i, c.RawOff, fmt.Sprintf("stored bytes have xxh64 %016x, the index says %016x: the compressed file is damaged", got, c.StoredXXH)}
		}
		rp := chunkBufs.get(c.RawLen)
		raw := (*rp)[:c.RawLen]
		cd := coderPool.Get().(*coder)
		err := cd.decodeChunk(raw, stored, c.Elem, c.Mode)
		coderPool.Put(cd)
		if err == nil {
			if got := xxhash.Sum64(raw); got != c.RawXXH {
				err = fmt.Errorf("decodes to bytes with xxh64 %016x, the index says %016x", got, c.RawXXH)
			}
		}
		if err != nil {
			chunkBufs.put(rp)
			return decoded{}, &ChunkError{i, c.RawOff, err.Error()}
		}
		return decoded{raw, func() { chunkBufs.put(rp) }}, nil
	}
	consume := func(i int, d decoded) error {
		defer d.done()
		hasher.Write(d.raw)
		if w != nil {
			if _, err := w.WriteAt(d.raw, h.Chunks[i].RawOff); err != nil {
				return err
			}
		}
		return nil
	}
	b := &inFlight{limit: decodeInFlight, weight: func(i int) int64 { return decodeWeight(h.Chunks[i]) }}
	if err := orderedBytes(ctx, len(h.Chunks), o.Workers, b, work, consume); err != nil {
		return "", 0, err
	}
	return hasher.Sum(), h.RawSize, nil
}

// CompressFile codes the file at src into dst (created, or truncated) with
// the trz codec; it is the codec without the store, for tools and tests.
func CompressFile(ctx context.Context, src, dst string, workers int) (raw, stored int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, 0, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, 0, err
	}
	_, stored, err = encodeFile(ctx, src, in, fi.Size(), out, codecOpts{Workers: workers})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return fi.Size(), stored, err
}

// DecompressFile is CompressFile's inverse.
func DecompressFile(ctx context.Context, src, dst string, workers int) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	_, n, err := decodeFile(ctx, in, fi.Size(), -1, out, codecOpts{Workers: workers})
	if err == nil {
		err = out.Truncate(n)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
