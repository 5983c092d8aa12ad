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
// [SplitFileName] does that, [FileName] builds names, and [ValidateName]
// rejects any name that would escape the directory. [Cache.List],
// [Cache.ForContainer] and [Cache.ForNetwork] scan the directory;
// [Cache.Get] and [Cache.Remove] address one file. [Entry.Result] decodes
// the cached result at its own CNI version.
//
// # Corrupt entries
//
// libcni writes cache files in place, without a rename, so a crash or a
// full disk leaves zero-length or truncated files behind. A file is corrupt
// when it is empty, is not JSON, has a kind other than [KindV1], lacks
// networkName, containerId or ifName, or holds a "result" that is not an
// object: exactly the files libcni's GetCachedAttachments skips.
//
// Scans never stop at a bad file. They return every good entry together
// with an error that joins one *[EntryError] per bad file; errors.Is with
// [ErrCorruptEntry] tells corruption from read failures. The EntryError
// names the file and, as far as the file name and the content allow, its
// network, container and interface, so that the caller can still tear the
// attachment down and then delete the file with [Cache.RemoveFile].
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
// a record atomically (temporary file, then rename; files 0600,
// directories 0700); [Cache.ReadOrder], [Cache.RemoveOrder] and
// [Cache.ListOrders] complete the set. A record that cannot be parsed is
// reported as an *[EntryError] matching [ErrCorruptEntry].
//
// # Concurrency
//
// A [Cache] holds no state besides its directory and takes no locks.
// Callers serialise operations on one container themselves.
package cache
