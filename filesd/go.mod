module gpu-portal.local/filesd

go 1.26.0
