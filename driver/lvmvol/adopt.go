package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// AdoptVolume takes over the existing LV of id for a record that lost it
// (cluster mode: a LogicalVolume made for a static PersistentVolume that
// names the LV, after a cluster was rebuilt). An LV Carve made is adopted
// as it is when settled; one half made or being deleted is refused, since
// only the operation's retry knows how to finish it. An LV Carve did not
// make is imported only when the administrator tagged it TagImport, and
// only a plain linear or thin LV that nothing holds open: its import
// makes it Carve's (its tags) and drops the import tag in one lvchange,
// so that a crash leaves it either untouched or imported, and a retry
// adopts the imported one. Its filesystem is checked by NodeStage, as
// for any volume (a mismatch is refused, never reformatted). An LV that
// is not there is ErrVolumeNotFound.
func (m *Manager) AdoptVolume(ctx context.Context, id volume.ID) (volume.Volume, error) {
	r := lvm.Fresh
	lv, err := m.lookup(ctx, r, id)
	switch {
	case err == nil && !isSettled(lv):
		return volume.Volume{}, fmt.Errorf("volume %s is half created or being deleted; only its own operation's retry finishes it: %w", id, volume.ErrFailedPrecondition)
	case err == nil:
		return m.GetVolume(ctx, r, id)
	case !errors.Is(err, volume.ErrNotManaged):
		return volume.Volume{}, err
	}
	raw, err := m.lvm.GetLV(ctx, r, id.VG, id.LV)
	if err != nil {
		return volume.Volume{}, fmt.Errorf("look up %s: %w", id, err)
	}
	if err := importable(raw); err != nil {
		return volume.Volume{}, fmt.Errorf("import %s: %w", id, err)
	}
	tags := []string{TagVolume, tagParamsPrefix + importedParams}
	if t := tagNamePrefix + id.LV; lvm.ValidateTag(t) == nil {
		tags = append(tags, t)
	}
	if err := m.lvm.ChangeTags(ctx, id.VG, id.LV, tags, []string{TagImport}); err != nil {
		return volume.Volume{}, fmt.Errorf("import %s: tag it Carve's: %w", id, err)
	}
	klog.InfoS("Imported an LV Carve did not make, as its carve.dev/import tag asks", "volume", id, "bytes", raw.Size)
	return m.GetVolume(ctx, r, id)
}

// importable tells whether an LV Carve did not make may be imported.
func importable(lv lvm.LV) error {
	switch {
	case !lv.HasTag(TagImport):
		return fmt.Errorf("the LV is not Carve's and is not tagged %s (lvchange --addtag %s %s/%s imports it on purpose): %w",
			TagImport, TagImport, lv.VGName, lv.Name, volume.ErrNotManaged)
	case lv.Layout != "linear" && lv.Layout != "thin,sparse":
		return fmt.Errorf("only linear and thin LVs can be imported, this one is %q: %w", lv.Layout, volume.ErrFailedPrecondition)
	case strings.Contains(lv.Role, "private"):
		return fmt.Errorf("the LV is part of another (lv_role %s): %w", lv.Role, volume.ErrFailedPrecondition)
	case lv.Origin != "" || isSnapshot(lv):
		return fmt.Errorf("a snapshot cannot be imported as a volume: %w", volume.ErrFailedPrecondition)
	case lv.Open:
		return fmt.Errorf("the LV is open (mounted or held by a process): %w", volume.ErrInUse)
	}
	return nil
}
