// The one place that picks the libfuse API version; every file of ours that talks to libfuse
// includes this instead of <fuse_lowlevel.h>, so all of them see the same declarations.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
