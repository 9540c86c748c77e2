package nodefs

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"carve.dev/carve/driver/volume"
)

// The flags a CO may ask for, checked before mount runs. mount(8) reads
// "-o" as one comma-separated list, so a flag holding a comma would smuggle
// in more flags; and some of its words are operations, not options: bind,
// rbind, move and remount would mount something else than the volume, or
// change an existing mount. So flags are an allowlist: the per-mount (VFS)
// flags every filesystem takes, and per filesystem the options its kernel
// documentation lists. A name ending in "=" takes a value, made of letters,
// digits and "_.:+-" (no separator, quote, space or path). Left out on
// purpose: options naming another device or a path (ext4 journal_dev,
// journal_path; xfs logdev, rtdev; btrfs device, subvol, subvolid: Carve
// mounts and checks the volume's own root), debugging options that break
// the filesystem (ext4 abort, test_dummy_encryption), and mount(8)'s own
// words (loop, offset, user, owner, X-mount.*, propagation flags). The
// SELinux options take a label, checked apart (selinux.go): the one value
// that may hold commas, inside double quotes.
//
// The per-mount words are those of vfsFlagBits (kernelmount.go), the one
// table that also says which MS_ flag each sets, so a word accepted here
// cannot reach the filesystem as an option of its own; "bind" is there
// for Carve's own bind mounts and refused from users (isVFSFlag).
var (
	fsFlags = map[string][]string{
		"ext4": words(`journal_checksum nojournal_checksum journal_async_commit journal_ioprio= norecovery noload
			data= commit= orlov oldalloc user_xattr nouser_xattr acl noacl bsddf minixdf debug errors= data_err=
			grpid bsdgroups nogrpid sysvgroups resgid= resuid= sb= barrier barrier= nobarrier inode_readahead_blks=
			stripe= delalloc nodelalloc max_batch_time= min_batch_time= auto_da_alloc auto_da_alloc= noauto_da_alloc
			init_itable init_itable= noinit_itable discard nodiscard nouid32 block_validity noblock_validity
			dioread_lock dioread_nolock max_dir_size_kb= i_version dax dax= quota noquota usrquota grpquota
			prjquota usrjquota= grpjquota= jqfmt= inlinecrypt nombcache prefetch_block_bitmaps
			no_prefetch_block_bitmaps mb_optimize_scan=`),
		"xfs": words(`allocsize= attr2 noattr2 dax dax= discard nodiscard grpid bsdgroups nogrpid sysvgroups
			filestreams ikeep noikeep inode32 inode64 largeio nolargeio logbufs= logbsize= noalign norecovery
			nouuid noquota uquota usrquota uqnoenforce quota pquota prjquota pqnoenforce gquota grpquota
			gqnoenforce sunit= swidth= swalloc wsync`),
		"btrfs": words(`acl noacl autodefrag noautodefrag barrier nobarrier clear_cache commit= compress compress=
			compress-force compress-force= datacow nodatacow datasum nodatasum discard discard= nodiscard
			enospc_debug noenospc_debug fatal_errors= flushoncommit noflushoncommit nologreplay max_inline=
			metadata_ratio= norecovery rescan_uuid_tree rescue= skip_balance space_cache space_cache=
			nospace_cache ssd ssd_spread nossd nossd_spread thread_pool= treelog notreelog usebackuproot
			user_subvol_rm_allowed`),
	}
)

func words(s string) []string { return strings.Fields(s) }

// isVFSFlag says whether word is a per-mount flag a user may pass:
// "defaults" or a word of vfsFlagBits other than "bind", which would mount
// something else than the volume.
func isVFSFlag(word string) bool {
	_, ok := vfsFlagBits[word]
	return word == "defaults" || ok && word != "bind"
}

// CheckMountFlags refuses, with an error wrapping volume.ErrBadMountFlag, any flag
// that fsType (ext4 when empty) does not take; see isVFSFlag and fsFlags.
func CheckMountFlags(fsType string, flags []string) error {
	fsType = strings.TrimSpace(fsType)
	known := fsFlags[fsType]
	if fsType == "" {
		fsType, known = volume.DefaultFSType, fsFlags[volume.DefaultFSType]
	}
	for _, f := range flags {
		if err := checkFlag(f, known); err != nil {
			return fmt.Errorf("%w: %q for %s: %w", volume.ErrBadMountFlag, f, fsType, err)
		}
	}
	return nil
}

func checkFlag(flag string, known []string) error {
	name, value, hasValue := strings.Cut(flag, "=")
	if hasValue && slices.Contains(seLinuxOptions, name) {
		return checkSELinuxValue(value)
	}
	key := name
	if hasValue {
		key += "="
		if value == "" || strings.IndexFunc(value, badValueChar) >= 0 {
			return errors.New("its value may hold only letters, digits and _.:+-")
		}
	}
	if isVFSFlag(key) || slices.Contains(known, key) {
		return nil
	}
	return errors.New("not an option this filesystem takes, or one Carve does not pass (see CheckMountFlags)")
}

func badValueChar(r rune) bool {
	ok := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_.:+-", r)
	return !ok
}
