// Package csiflow drives one volume through the CSI lifecycle over real
// gRPC, the way a CO does: create, controller publish (attach), stage,
// publish, and all the way back. The lifecycle suite and the demo use it.
package csiflow

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Client holds the CSI services of one endpoint.
type Client struct {
	Identity   csi.IdentityClient
	Controller csi.ControllerClient
	Node       csi.NodeClient
	Group      csi.GroupControllerClient
	Metadata   csi.SnapshotMetadataClient
	conn       *grpc.ClientConn
}

// Dial connects to endpoint ("unix:///path").
func Dial(endpoint string) (*Client, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return &Client{
		Identity:   csi.NewIdentityClient(conn),
		Controller: csi.NewControllerClient(conn),
		Node:       csi.NewNodeClient(conn),
		Group:      csi.NewGroupControllerClient(conn),
		Metadata:   csi.NewSnapshotMetadataClient(conn),
		conn:       conn,
	}, nil
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// MountCap asks for a filesystem volume of fsType ("" lets the driver choose).
func MountCap(mode csi.VolumeCapability_AccessMode_Mode, fsType string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
	}
}

// BlockCap asks for a raw block volume.
func BlockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
}

// Volume is one volume on its way through the lifecycle.
type Volume struct {
	c              *Client
	ID             string
	Capacity       int64
	Cap            *csi.VolumeCapability
	Context        map[string]string
	PublishContext map[string]string
	NodeID         string
	Staging        string
	// StageSecrets are NodeStageVolume's secrets (an encrypted volume's
	// key), as kubelet reads them from the StorageClass's node-stage secret.
	StageSecrets map[string]string
}

// Create asks for a volume of size bytes.
func (c *Client) Create(ctx context.Context, name string, size int64, params map[string]string, vc *csi.VolumeCapability) (*Volume, error) {
	resp, err := c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: params,
	})
	if err != nil {
		return nil, fmt.Errorf("CreateVolume %s: %w", name, err)
	}
	v := resp.GetVolume()
	return &Volume{c: c, ID: v.GetVolumeId(), Capacity: v.GetCapacityBytes(), Cap: vc, Context: v.GetVolumeContext()}, nil
}

// Attach is ControllerPublishVolume to node.
func (v *Volume) Attach(ctx context.Context, node string) error {
	resp, err := v.c.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: v.ID, NodeId: node, VolumeCapability: v.Cap, VolumeContext: v.Context,
	})
	if err != nil {
		return fmt.Errorf("ControllerPublishVolume %s: %w", v.ID, err)
	}
	v.NodeID, v.PublishContext = node, resp.GetPublishContext()
	return nil
}

// Stage is NodeStageVolume at staging.
func (v *Volume) Stage(ctx context.Context, staging string) error {
	_, err := v.c.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: v.ID, StagingTargetPath: staging, VolumeCapability: v.Cap,
		PublishContext: v.PublishContext, VolumeContext: v.Context, Secrets: v.StageSecrets,
	})
	if err != nil {
		return fmt.Errorf("NodeStageVolume %s: %w", v.ID, err)
	}
	v.Staging = staging
	return nil
}

// Publish is NodePublishVolume at target.
func (v *Volume) Publish(ctx context.Context, target string, readOnly bool) error {
	_, err := v.c.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: v.ID, StagingTargetPath: v.Staging, TargetPath: target, VolumeCapability: v.Cap,
		Readonly: readOnly, PublishContext: v.PublishContext, VolumeContext: v.Context,
	})
	if err != nil {
		return fmt.Errorf("NodePublishVolume %s at %s: %w", v.ID, target, err)
	}
	return nil
}

// Unpublish is NodeUnpublishVolume of target.
func (v *Volume) Unpublish(ctx context.Context, target string) error {
	if _, err := v.c.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.ID, TargetPath: target}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume %s at %s: %w", v.ID, target, err)
	}
	return nil
}

// Unstage is NodeUnstageVolume.
func (v *Volume) Unstage(ctx context.Context) error {
	if _, err := v.c.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.ID, StagingTargetPath: v.Staging}); err != nil {
		return fmt.Errorf("NodeUnstageVolume %s: %w", v.ID, err)
	}
	return nil
}

// Detach is ControllerUnpublishVolume.
func (v *Volume) Detach(ctx context.Context) error {
	if _, err := v.c.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.ID, NodeId: v.NodeID}); err != nil {
		return fmt.Errorf("ControllerUnpublishVolume %s: %w", v.ID, err)
	}
	return nil
}

// Delete is DeleteVolume.
func (v *Volume) Delete(ctx context.Context) error {
	if _, err := v.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID}); err != nil {
		return fmt.Errorf("DeleteVolume %s: %w", v.ID, err)
	}
	return nil
}

// Up attaches, stages and publishes at target, as kubelet does for a pod.
func (v *Volume) Up(ctx context.Context, node, staging, target string) error {
	if err := v.Attach(ctx, node); err != nil {
		return err
	}
	if err := v.Stage(ctx, staging); err != nil {
		return err
	}
	return v.Publish(ctx, target, false)
}

// Down unpublishes target, unstages and detaches, in that order.
func (v *Volume) Down(ctx context.Context, target string) error {
	if err := v.Unpublish(ctx, target); err != nil {
		return err
	}
	if err := v.Unstage(ctx); err != nil {
		return err
	}
	return v.Detach(ctx)
}

// Wrap makes a Volume of a CreateVolume response (for requests Create does
// not build, such as those with a content source).
func (c *Client) Wrap(v *csi.Volume, vc *csi.VolumeCapability) *Volume {
	return &Volume{c: c, ID: v.GetVolumeId(), Capacity: v.GetCapacityBytes(), Cap: vc, Context: v.GetVolumeContext()}
}
