package lvmd

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Client calls one lvmd over its unix socket.
type Client struct{ conn *grpc.ClientConn }

// Dial makes a client of the lvmd listening on socket (a path); the
// connection is made at the first call.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("lvmd %s: %w", socket, err)
	}
	return &Client{conn: conn}, nil
}

func (c *Client) Close() error { return c.conn.Close() }

// rawCodec hands gRPC a message's bytes as they are: the request is a
// []byte, the reply goes into a *[]byte. Its name, "proto", is the content
// subtype lvmd's server decodes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: marshal %T, want []byte", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: unmarshal into %T, want *[]byte", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

func (c *Client) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var resp []byte
	if err := c.conn.Invoke(ctx, method, req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		return nil, fmt.Errorf("lvmd %s: %w", method, err)
	}
	return resp, nil
}

// CreateLV creates a volume in a device class and returns it as lvmd
// reports it.
func (c *Client) CreateLV(ctx context.Context, r CreateLVRequest) (LogicalVolume, error) {
	b, err := c.call(ctx, methodCreateLV, r.marshal())
	if err != nil {
		return LogicalVolume{}, err
	}
	return unmarshalVolumeResponse(b)
}

// RemoveLV removes a volume (or a snapshot).
func (c *Client) RemoveLV(ctx context.Context, r RemoveLVRequest) error {
	_, err := c.call(ctx, methodRemoveLV, r.marshal())
	return err
}

// CreateLVSnapshot makes a thin snapshot of a thin volume.
func (c *Client) CreateLVSnapshot(ctx context.Context, r CreateLVSnapshotRequest) (LogicalVolume, error) {
	b, err := c.call(ctx, methodCreateLVSnapshot, r.marshal())
	if err != nil {
		return LogicalVolume{}, err
	}
	return unmarshalVolumeResponse(b)
}

// GetFreeBytes is the free space lvmd reports for a device class.
func (c *Client) GetFreeBytes(ctx context.Context, deviceClass string) (uint64, error) {
	b, err := c.call(ctx, methodGetFreeBytes, appendString(nil, 1, deviceClass))
	if err != nil {
		return 0, err
	}
	return unmarshalFreeBytes(b)
}
