// Package checkpoint owns the checkpoint store and its lifecycle: the
// handshake markers, verification, the durable atomic commit, the latest
// pointer, retention, the tiered drain and the job history the requeue
// decisions read. It imports neither plan nor topo.
//
// # Lifecycle
//
// A trainer saves checkpoint <tag> into CKPT_DIR/<tag>/ (or node-local
// storage, drained into CKPT_DIR/.trainrun/staging/<tag>/ by Drain); each rank
// creates <tag>/.trainrun/done.<RANK> once its files are durable. Commit then
// fsyncs and hashes every file, writes <tag>/.trainrun/manifest.json durably
// (temporary file, fsync, rename, directory fsync), renames a staged
// checkpoint into place, fsyncs the store's directory and, last, rewrites the
// .trainrun/latest pointer the same way. A checkpoint directory outside
// staging that holds a manifest is committed; nothing else is. Latest returns
// the newest committed checkpoint (by step, then commit order) that verifies,
// falling back past corrupt ones and saying so. The whole layout is the
// Layout table.
//
// Hashing every byte at commit makes commit time grow with the checkpoint
// (a terabyte is minutes of reading). With Options.DeferHash, Commit of an
// in-place checkpoint records sizes only (the commit costs one fsync and one
// stat per file) and Seal adds the checksums afterwards, in the background;
// a drained checkpoint always has them, computed during the copy.
//
// # What is guaranteed, and where
//
// On a local POSIX file system (ext4, XFS, btrfs, tmpfs) rename is atomic
// (within a directory for the manifest and the pointer, between two
// directories of the file system for staging -> <tag>), and fsync of a file
// and then of its directory makes the data and the name durable. So after a process is killed at any point
// (SIGKILL, OOM, a node losing power once the disk honours flushes), the
// store holds committed checkpoints that verify, plus uncommitted debris that
// Latest ignores and Recover removes or completes. The crash-consistency test
// kills the writer at hundreds of points, including between every durable
// step, and checks exactly this.
//
// On NFS (v3/v4), rename is one RPC, atomic at the server, and
// namespace operations are synchronous at the server; file data reaches the
// server at fsync or close (close-to-open consistency), so another client sees
// a checkpoint's bytes only after the writer closed or fsynced them, which is
// what the done marker after the trainer's own fsync provides. Attribute
// caching can make another client see a stale pointer or a missing marker for
// up to actimeo seconds: Complete and Latest may be late, never wrong,
// because a manifest is only written after every file was read back for its
// hash. fsync of a directory is accepted and is a no-op there.
//
// On Lustre and GPFS (IBM Storage Scale), rename is atomic (between
// directories on different Lustre MDTs too, as a distributed transaction)
// and metadata operations are coherent across clients (Lustre's MDS, GPFS's
// token manager), and fsync flushes a file's data to the servers. A directory
// fsync is accepted, but how far it forces the metadata server's journal is
// implementation-specific: against killed processes and failed clients the
// guarantee above holds; against a metadata server that crashes it is as
// strong as the file system's own recovery (Lustre replays clients'
// uncommitted transactions). Both keep POSIX semantics for one writer, which
// is how trainrun uses them: one writer per file, one committer per store.
//
// Staging must be on the same file system as the store (it is inside it), so
// the commit's rename never turns into a copy.
//
// Native checkpoints (Megatron's tracker, PyTorch DCP's .metadata, Hugging
// Face and Lightning layouts) are recognised without the handshake; their
// completion marker only proves the framework believed its save finished,
// not that every rank's files were durable (NativeNote says which per kind).
//
// # Files other users may have written
//
// A store is read by processes other than its writer (the SPANK plugin in
// slurmstepd resolves TRAINRUN_RESUME_DIR; the epilog drains as the job's
// user), so nothing in it is trusted (issue 12). Manifests, drain records
// and the pointer are opened O_NOFOLLOW|O_NONBLOCK, must be regular files
// and are read through limits (8 MiB, 16 MiB, 4 KiB); a checkpoint's files
// are reached through an os.Root of its directory, so no link or ".."
// leads out of it, and a manifest entry that is not a clean relative path
// inside the checkpoint makes the manifest unreadable before anything is
// stat'ed (no existence or size oracle). chunk_bytes, world_size and the
// chunks one hashing pass tracks are capped. Only canonical done.<RANK>
// names count, each once. The metadata directories (.trainrun, staging,
// trash, corrupt) are Lstat'ed and a link there is refused; the trash is
// emptied relative to its verified descriptor (internal/safefs), never
// through a planted link. A drain given the node's ranks carries only their
// markers.
//
// # Compression
//
// Committed checkpoints can be stored compressed, losslessly, with the trz
// codec (codec.go: byte planes by position within the element, huff0 per
// plane, zstd for byte data, independent checksummed chunks coded on all
// cores). Store.CompressRetained compresses every committed checkpoint but
// the newest (the controller runs it in the background after each commit
// when CkptCompress is archive, auto or always); the tiered drain writes
// files compressed into staging when the store's mode (.trainrun/compress)
// is always, or auto and a measured sample of the compressor beats a probe
// write into staging. A compressed file is <name>.trz; its manifest entry
// keeps <name>'s size and xxh64 and adds the codec and the stored file's
// size and xxh64, so Verify checks both and a damaged chunk is named.
// Replacing a raw file by its compressed copy (and back, Restore) is a
// temporary file, fsync, rename, then the manifest, then the other copy's
// removal: killed anywhere, the checkpoint verifies. Trainers never see a
// compressed file: the controller restores its resume checkpoint in place
// first (EnsureRaw), and `trainrun ckpt restore TAG --to DIR` writes the
// original bytes elsewhere.
//
// # Concurrency
//
// One controller commits, prunes and recovers a store; drains on many nodes
// write disjoint staging files; the trainer writes only its own <tag>/.
// Nothing here takes locks across nodes, so two controllers on one store are
// not supported.
package checkpoint
