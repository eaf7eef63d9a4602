package objstore

import (
	"fmt"
	"os"
	"strconv"

	"github.com/lastmile/lastmile/decode"
)

// ConfigFromEnv returns the Config a command-line reader gets from its
// environment: the endpoint override from AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL (the variables the AWS SDKs read), the region from
// AWS_REGION, and path-style addressing from LASTMILE_S3_PATH_STYLE
// (true/false; default: path style when an endpoint is set, as S3-compatible
// stores want). Credentials come from the standard chain (see Config).
func ConfigFromEnv() (Config, error) {
	var c Config
	c.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	c.Region = os.Getenv("AWS_REGION")
	c.PathStyle = c.Endpoint != ""
	if v := os.Getenv("LASTMILE_S3_PATH_STYLE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("LASTMILE_S3_PATH_STYLE=%q: want true or false", v)
		}
		c.PathStyle = b
	}
	return c, nil
}

// Mount returns local with src serving the s3:// names.
func Mount(local decode.FS, src *Source) decode.FS {
	return decode.WithSchemes(local, map[string]decode.FS{Scheme: src})
}
