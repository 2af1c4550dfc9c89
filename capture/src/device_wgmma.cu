// device_wgmma.cu: the capture kit's wgmma kernels (capture_wgmma.cuh, generated): their
// own translation unit, built for sm_90a alone (the only target with wgmma), so that the
// other targets' builds do not compile them.
#include "capture_device.cuh"

#include "capture_wgmma.cuh"
