// Package cache is the only code in this module that reads, writes or
// removes libcni's result-cache files. Everything else asks a [Cache].
//
// # Cache layout
//
// libcni keeps one file per attachment, written by ADD and removed by DEL:
//
//	<dir>/results/<network>-<containerID>-<ifname>
//
// where <dir> defaults to [libcni.CacheDir] (/var/lib/cni). The file is a
// JSON object of kind [KindV1]:
//
//	{"kind":"cniCacheV1","containerId":"…","config":"<base64 config list>",
//	 "ifName":"eth0","networkName":"…","netns":"/var/run/netns/…",
//	 "cniArgs":[["K","V"]],"capabilityArgs":{…},"result":{…}}
//
// [Entry] is one such file. Network names and interface names may contain
// '-', so a file name can only be split once the container ID is known:
// [SplitFileName] and [ParseFileName] do that (and [GuessFileName] when it
// is not, [GuessNames] for a listing's corrupt files), and [FileName]
// builds names. [ValidateNetworkName], [ValidateContainerID] and
// [ValidateIfName] apply libcni's ADD rules plus path checks and the
// length limits that keep a file name within 255 bytes. [Cache.List] and
// [Cache.ForContainer] scan the directory; [Cache.Get] and [Cache.Remove]
// address one file. [Entry.Result] decodes the cached result at its own
// CNI version.
//
// # Corrupt entries
//
// libcni writes cache files in place, without a rename, so a crash or a
// full disk leaves zero-length or truncated files behind. A file is corrupt
// when it is empty, is not JSON, has a kind other than [KindV1], lacks
// networkName, containerId or ifName, or holds a "result" that is not an
// object (the files libcni's GetCachedAttachments skips); and also when it
// is not a regular file, is larger than [MaxFileSize], names a network,
// container or interface that fails validation, or whose names or cached
// config's name disagree with its own file name. Such content could steer
// a path, an environment variable or a plugin run.
//
// Scans never stop at a bad file. A [Listing] holds every good entry and
// one *[EntryError] per bad file; errors.Is with [ErrCorruptEntry] tells
// corruption from read failures. The EntryError names the file and, when
// the file name can be split and validated ([ParseFileName]), its network,
// container and interface, never names taken from a corrupt file's
// content, so that the caller can still tear the attachment down and then
// delete the file with [Cache.RemoveFile].
//
// libcni's result converters can panic on some cached results;
// [Entry.Result], [Entry.ResultAt] and [Entry.CheckLibcniResult] recover
// and report an error. CheckLibcniResult tells whether libcni's own DEL
// can use a cached result (when it cannot, libcni drops the entry before
// running the plugins).
//
// # Attachment order
//
// The results directory does not record the order in which ADD attached a
// container's networks, yet DEL should run in reverse order. The package
// keeps that order itself, one file per container:
//
//	<dir>/ocicni/attachments/<containerID>
//	{"kind":"ocicniOrderV1","containerId":"…","attachments":[{"network":"…","ifName":"…"}]}
//
// These files live outside results/ so that libcni, and CRI-O's
// "rm results/*<id>*" cleanup, never see them. [Cache.WriteOrder] replaces
// a record atomically and durably (temporary file, fsync, rename, fsync of
// the directory; files 0600, directories 0700); [Cache.ReadOrder],
// [Cache.RemoveOrder] and [Cache.ListOrders] complete the set. A record
// that cannot be parsed is reported as an *[EntryError] matching
// [ErrCorruptEntry]. Each attachment may carry the digest of the config it
// was added with ([Attachment.Config]) and the state of its pending DEL
// retry ([Heal]).
//
// Hidden files in that directory are the package's own: ".tmp-*" are
// records being written, ".cfg.*" are links to saved configs (see "Saved
// configs"), and ".spare-*" are records that RemoveOrder retired and
// WriteOrder reuses as its temporary file, because creating a file costs
// far more than renaming one on some file systems (see BENCHMARKS.md,
// "Figures behind design choices"). A Cache keeps at most 32 spares, and
// the first WriteOrder of a Cache adopts or removes those an earlier
// process left.
// Every durable write holds a lock (flock) on its temporary file until the
// file has its name, so that [Cache.RemoveTemps] removes the ones a crash
// left, records' and saved configs', and never one being written.
//
// # Saved configs
//
// [Cache.SaveConfig] keeps the exact bytes of a config, content-addressed
// ([ConfigDigest]): one shared copy per distinct config in
// <dir>/ocicni/configs/<hex>, written durably the first time, and, for
// each record that uses it, a hard link next to the record,
// <dir>/ocicni/attachments/.cfg.<containerID>.<hex>, which the record's
// next write makes durable with the same directory sync. [Cache.ReadConfig]
// reads a record's link (else the shared copy) and checks the content
// against the digest. [Cache.ReleaseConfigs] removes a record's links and
// each shared copy no record links any more, so the configs go with the
// records, except the copies of the few configs the Cache saved last,
// which the next setup links instead of writing them again;
// [Cache.ListConfigs] and [Cache.RemoveSavedConfig] let a garbage
// collector remove those and what a crash left.
//
// A write that fails (a full disk, an I/O error) leaves no file of its
// own: [Cache.SaveConfig] removes its temporary file and the link it
// made, and [Cache.WriteOrder] its temporary file, keeping the old
// record, unless only the final directory sync failed ([ErrNotDurable]).
// A caller whose record cannot be written takes its saves back with
// [Cache.UndoSaveConfig] (see [Cache.SaveConfigUndoable]), which removes
// only what each save made: a new link, and a new shared copy that no
// record links. The directories of the layout, once made, stay: other
// containers' writes, which take no lock in common, may be about to use
// them.
//
// # Concurrency
//
// A [Cache] holds its directory and its spare records, guarded by a
// mutex of its own; it takes no other lock. Callers serialise operations
// on one container themselves.
package cache
