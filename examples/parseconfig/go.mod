module example.com/parseconfig

go 1.22
