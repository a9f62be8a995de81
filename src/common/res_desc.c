/* res_desc.c - see res_desc.h. */
#include "res_desc.h"

#include <string.h>

int res_desc_has_handle(uint32_t type)
{
    return type == CU_RESOURCE_TYPE_ARRAY || type == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
}

void *res_desc_handle(const CUDA_RESOURCE_DESC *d)
{
    if (d->resType == CU_RESOURCE_TYPE_ARRAY) return d->res.array.hArray;
    if (d->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) return d->res.mipmap.hMipmappedArray;
    return NULL;
}

int res_desc_to_msg(const CUDA_RESOURCE_DESC *d, uint64_t handle_id, struct msg_res_desc *m)
{
    memset(m, 0, sizeof *m);
    m->type = (uint32_t)d->resType;
    m->flags = d->flags;
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        m->array = handle_id;
        return 0;
    case CU_RESOURCE_TYPE_LINEAR:
        m->ptr = d->res.linear.devPtr;
        m->format = (uint32_t)d->res.linear.format;
        m->channels = d->res.linear.numChannels;
        m->size = d->res.linear.sizeInBytes;
        return 0;
    case CU_RESOURCE_TYPE_PITCH2D:
        m->ptr = d->res.pitch2D.devPtr;
        m->format = (uint32_t)d->res.pitch2D.format;
        m->channels = d->res.pitch2D.numChannels;
        m->width = d->res.pitch2D.width;
        m->height = d->res.pitch2D.height;
        m->pitch = d->res.pitch2D.pitchInBytes;
        return 0;
    default:
        return -1;
    }
}

int res_desc_from_msg(const struct msg_res_desc *m, void *handle, CUDA_RESOURCE_DESC *d)
{
    memset(d, 0, sizeof *d);
    d->resType = (CUresourcetype)m->type;
    d->flags = m->flags;
    switch (m->type) {
    case CU_RESOURCE_TYPE_ARRAY:
        d->res.array.hArray = (CUarray)handle;
        return 0;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        d->res.mipmap.hMipmappedArray = (CUmipmappedArray)handle;
        return 0;
    case CU_RESOURCE_TYPE_LINEAR:
        d->res.linear.devPtr = (CUdeviceptr)m->ptr;
        d->res.linear.format = (CUarray_format)m->format;
        d->res.linear.numChannels = m->channels;
        d->res.linear.sizeInBytes = (size_t)m->size;
        return 0;
    case CU_RESOURCE_TYPE_PITCH2D:
        d->res.pitch2D.devPtr = (CUdeviceptr)m->ptr;
        d->res.pitch2D.format = (CUarray_format)m->format;
        d->res.pitch2D.numChannels = m->channels;
        d->res.pitch2D.width = (size_t)m->width;
        d->res.pitch2D.height = (size_t)m->height;
        d->res.pitch2D.pitchInBytes = (size_t)m->pitch;
        return 0;
    default:
        return -1;
    }
}
