// Package plot draws line charts of measurements to PNG, for `normsim bench
// --plot`: a figure of charts in a grid, each with ticked linear or log
// axes, a legend, series drawn as marked points joined by lines, and an
// optional dashed target line.
//
// It uses the standard library's image packages and golang.org/x/image (a
// bitmap font for text, an anti-aliasing rasterizer for shapes): no cgo, no
// network, and the same figure always encodes to the same bytes.
package plot
