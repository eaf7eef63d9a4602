package main

import (
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
)

// inputFS is where the commands that run jobs read inputs from: local
// files with the user's own rights, and s3:// objects with the user's own
// AWS credentials and endpoint (objstore.ConfigFromEnv). Making it costs
// no request.
func inputFS() (decode.FS, error) {
	cfg, err := objstore.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	c, err := objstore.New(cfg)
	if err != nil {
		return nil, err
	}
	return objstore.Mount(nil, c.Source(nil)), nil
}
