/* range_attrs.c - cuMemRangeGetAttributes: several attributes of one
 * managed range in one call, answered as the driver defines it, one
 * cuMemRangeGetAttribute per attribute in order (each is forwarded with its
 * own size). The first error ends the call, as in the driver. */
#include "shim.h"

static CUresult range_get_attributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                     size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    if (!data || !dataSizes || !attributes || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes; i++) {
        CUresult r = cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                        size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    SHIM_ENTER(cuMemRangeGetAttributes, (data, dataSizes, attributes, numAttributes, devPtr, count));
    return range_get_attributes(data, dataSizes, attributes, numAttributes, devPtr, count);
}
